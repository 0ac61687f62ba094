package cli_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/cli"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// blackhole CMD ARGS... runs CMD with every "BLACKHOLE" in its arguments
// replaced by the address of a loopback port that accepts connections and
// never answers, as a host behind a dropping firewall does.
func blackhole() {
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "blackhole:", err)
		os.Exit(2)
	}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	args := os.Args[1:]
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "BLACKHOLE", lis.Addr().String())
	}
	os.Exit(runStdio(exec.Command(args[0], args[1:]...)))
}

func runStdio(c *exec.Cmd) int {
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := c.Run(); c.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return c.ProcessState.ExitCode()
}

// pasteback allow|deny|sh:FILE CMD ARGS... runs a headless login (CMD) as a
// person on another computer finishes it: it takes the link login prints,
// first pastes a line that is not an answer and waits for login to refuse
// it, then signs in at the local box of $BOX_STATE with its owner's code
// and clicks Allow or Deny through the API the consent page's script
// calls (localbox/page), and pastes the address the browser would end on
// into login's stdin, never loading it. It copies login's output and
// exits with its status.
func pasteback() {
	action := os.Args[1]
	c := exec.Command(os.Args[2], os.Args[3:]...)
	c.Stdout = os.Stdout
	stdin, _ := c.StdinPipe()
	stderr, _ := c.StderrPipe()
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "pasteback:", err)
		os.Exit(2)
	}
	sc := bufio.NewScanner(stderr)
	var link string
	for sc.Scan() {
		fmt.Fprintln(os.Stderr, sc.Text())
		l := strings.TrimSpace(sc.Text())
		if strings.Contains(l, auth.AuthorizePath+"?") {
			link = l
			fmt.Fprintln(stdin, "https://example.com/not-the-answer")
		}
		if link != "" && strings.Contains(l, "is not the address the browser ended on") {
			red, err := consent(link, action)
			if err != nil {
				fmt.Fprintln(os.Stderr, "pasteback:", err)
				c.Process.Kill()
				break
			}
			fmt.Fprintln(stdin, red)
		}
	}
	io.Copy(os.Stderr, stderr)
	c.Wait()
	os.Exit(c.ProcessState.ExitCode())
}

// consent signs in at link's server with the owner's code and answers
// the request, returning the redirect the browser would follow. An
// action "sh:FILE" runs the shell script FILE instead, with $LINK and
// $CODE set, and takes its stdout's first line.
func consent(link, action string) (string, error) {
	base, query, _ := strings.Cut(link, auth.AuthorizePath+"?")
	code, err := localbox.SignInCode(os.Getenv("BOX_STATE"))
	if err != nil {
		return "", err
	}
	if script, ok := strings.CutPrefix(action, "sh:"); ok {
		c := exec.Command("sh", script)
		c.Env = append(os.Environ(), "LINK="+link, "CODE="+code)
		c.Stderr = os.Stderr
		out, err := c.Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", script, err)
		}
		red, _, _ := strings.Cut(string(out), "\n")
		return red, nil
	}
	return cli.Consent(base, query, code, action)
}
