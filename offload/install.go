package offload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// BoxRun runs line in the box's login shell (the user's profile read, as
// for the CLI itself) with stdin, and returns its exit code; err is for a
// command that could not run at all.
type BoxRun func(ctx context.Context, line string, stdin io.Reader, stdout, stderr io.Writer) (code int, err error)

// Installer installs a kind's CLI in a box, step by step, so that a
// failure names its step: the vendor's installer script is downloaded
// with curl and run with bash (a `curl | bash` hides curl's failure
// behind bash's success); when its host cannot be reached from the box,
// curl is not there, or the kind has no script, npm installs the kind's
// package into ~/.local; then the CLI must answer --version on the box's
// login PATH.
type Installer struct {
	Kind agentwire.Kind
	Run  BoxRun
	// Box names the box in next steps.
	Box string
	// Log receives one line per step; nil discards them.
	Log io.Writer
	// Output receives the installers' own output (curl's errors, the
	// vendor's installer, npm's notices and warnings); nil discards it.
	Output io.Writer
	// EchoErrors copies a failed npm's error lines to Log, for an Output
	// the user does not see.
	EchoErrors bool
	// Force has npm replace a file in the way of the CLI's link in
	// ~/.local/bin (npm install --force).
	Force bool
}

// InstallResult is what Install did: Via is "installer" or "npm";
// Version is the CLI's --version line.
type InstallResult struct {
	Via, Version string
}

// curlUnreachable are curl's exit codes for a host that cannot be
// reached: 6 no name, 7 no connection, 28 timed out, 35 TLS connect
// failed.
var curlUnreachable = map[int]bool{6: true, 7: true, 28: true, 35: true}

// npmTLSRE matches npm's TLS failures behind an intercepting proxy.
var npmTLSRE = regexp.MustCompile(`SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to get local issuer certificate|self[- ]signed certificate|CERT_HAS_EXPIRED|ERR_TLS_CERT`)

// Install runs the steps; a failure is an *Error (exit 1) naming the
// step, with its next step.
func (in *Installer) Install(ctx context.Context) (*InstallResult, error) {
	k := in.Kind
	res := &InstallResult{}
	viaNPM := k.Install().ScriptURL == ""
	noCurl := false
	if !viaNPM {
		in.logf("downloading the %s installer: curl -fsSL %s", k.Title(), k.Install().ScriptURL)
		var script, errb bytes.Buffer
		code, err := in.Run(ctx, "curl -fsSL "+shellquote.Word(k.Install().ScriptURL), nil, &script, in.tee(&errb))
		if err != nil {
			return nil, in.failed("download the installer", err, nil)
		}
		switch {
		case code == 0:
			in.logf("running the %s installer: bash", k.Title())
			// The script arrives on stdin, as it does from curl | bash.
			var out bytes.Buffer
			code, err := in.Run(ctx, "bash", bytes.NewReader(script.Bytes()), in.tee(&out), in.tee(&out))
			if err != nil || code != 0 {
				return nil, in.failed("run the installer", exitErr(code, err, &out), nil)
			}
			res.Via = "installer"
		case curlUnreachable[code] && k.Install().Package != "":
			in.logf("%s cannot be reached from the box (curl exit %d); installing %s from npm instead", hostOf(k.Install().ScriptURL), code, k.Install().Package)
			viaNPM = true
		case code == 127 && k.Install().Package != "":
			in.logf("curl is not in the box; installing %s from npm instead", k.Install().Package)
			viaNPM, noCurl = true, true
		case code == 127:
			return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("install-cli: curl is not in the box (on its login PATH)"), Next: []Step{in.installCurl()}}
		default:
			return nil, in.failed("download the installer", exitErr(code, nil, &errb),
				[]Step{{"check that the box reaches " + hostOf(k.Install().ScriptURL) + ", then run install-cli again"}})
		}
	}
	if viaNPM {
		line := `npm install -g --prefix "$HOME/.local" `
		if in.Force {
			line += "--force "
		}
		line += shellquote.Word(k.Install().Package)
		in.logf("installing %s: %s", k.Install().Package, line)
		var out bytes.Buffer
		code, err := in.Run(ctx, line, nil, in.tee(&out), in.tee(&out))
		if err != nil || code != 0 {
			step := "npm install " + k.Install().Package
			if p := npmExists(out.String()); p != "" && err == nil {
				return nil, in.inTheWay(ctx, step, p)
			}
			if in.EchoErrors {
				in.echoNPMErrors(out.String())
			}
			var next []Step
			switch {
			case code == 127 && noCurl:
				return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("install-cli: curl is not in the box, nor is npm (on its login PATH): %s needs one of them", k.Title()), Next: []Step{in.installCurl()}}
			case code == 127:
				next = append(next, in.installNode())
			case npmTLSRE.Match(out.Bytes()):
				next = append(next, Step{"npm's TLS check failed, as behind a TLS-intercepting proxy: give npm the proxy's CA in the box, cafile=/path/to/ca.pem in ~/.npmrc, or export NODE_EXTRA_CA_CERTS=/path/to/ca.pem in ~/.profile, then run install-cli again"})
			}
			return nil, in.failed(step, lineErr(code, err, npmLine(out.String())), next)
		}
		res.Via = "npm"
	}
	in.logf("checking: %s --version on the box's login PATH", k.Binary())
	// The version is stdout's: a CLI's warnings go to stderr (Codex's about
	// PATH aliases under a /tmp home came first and read as its version).
	var out, errOut bytes.Buffer
	code, err := in.Run(ctx, k.Binary()+" --version", nil, &out, &errOut)
	if err != nil || code != 0 {
		out.Write(errOut.Bytes())
		return nil, in.failed("check "+k.Binary()+" --version", exitErr(code, err, &out),
			[]Step{{"the installer put " + k.Binary() + " where the box's login shell does not look: add its directory (often ~/.local/bin) to PATH in the box's ~/.profile"}})
	}
	if out.Len() == 0 {
		out = errOut
	}
	res.Version, _, _ = strings.Cut(strings.TrimSpace(out.String()), "\n")
	return res, nil
}

// installCurl is the step that installs curl in a box lacking it: as
// root through sudo, which the box user has without a password (the
// contract's guest, the local box's image); apt's lists first, as the
// image is built without them.
func (in *Installer) installCurl() Step {
	return Step{"install curl in the box: ", Command{Verb: VerbRsh, Box: in.Box, Args: []string{"'sudo apt-get update && sudo apt-get install -y curl'"}}, ", then run install-cli again"}
}

// installNode is the step that installs Node.js and npm in a box lacking
// npm, as installCurl installs curl: Debian's packages (Node.js 18 in
// bookworm, which both CLIs' npm packages run on).
func (in *Installer) installNode() Step {
	return Step{"npm is not on the box's login PATH: install Node.js and npm in the box: ", Command{Verb: VerbRsh, Box: in.Box, Args: []string{"'sudo apt-get update && sudo apt-get install -y nodejs npm'"}}, ", then run install-cli again"}
}

func (in *Installer) logf(format string, args ...any) {
	if in.Log != nil {
		fmt.Fprintf(in.Log, "cocoonbox: "+format+"\n", args...)
	}
}

func (in *Installer) failed(step string, err error, next []Step) *Error {
	return &Error{Code: ExitFailed, Err: fmt.Errorf("install-cli: %s failed: %v", step, err), Next: next}
}

// exitErr is a step's failure in one line: its exit code and the last
// line of its output.
func exitErr(code int, err error, out *bytes.Buffer) error {
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lineErr(code, err, lines[len(lines)-1])
}

// lineErr is a step's failure in one line: its exit code and line.
func lineErr(code int, err error, line string) error {
	if err != nil {
		return err
	}
	msg := box.ExitStatus{Code: code}.Text()
	if code == 127 {
		msg = "command not found (exit status 127)"
	}
	if line = strings.TrimSpace(line); line != "" {
		msg += ": " + printable.Line(line, 0)
	}
	return fmt.Errorf("%s", msg)
}

// npmTellingRE matches the lines of npm's failure output that say what
// failed ("npm error" since npm 10, "npm ERR!" before).
var npmTellingRE = regexp.MustCompile(`^npm (?:error|ERR!) (?:code |errno |network |.*request to .* failed)`)

// npmLine is the most telling line of npm's failure output: the first
// code, errno, network or "request to … failed" line; else the last line
// but the pointer to npm's log file.
func npmLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if l = strings.TrimSpace(l); npmTellingRE.MatchString(l) {
			return l
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.Contains(l, "complete log of this run") && !strings.HasSuffix(l, "-debug.log") && !strings.HasSuffix(l, "-debug-0.log") {
			return l
		}
	}
	return ""
}

// npmExistsRE matches the lines of npm's EEXIST failure: its code, and
// the path in the way (offload/testdata/npm/eexist.txt).
var npmExistsRE = regexp.MustCompile(`(?m)^npm (?:error|ERR!) (code EEXIST|path (.+))$`)

// npmExists is the path npm's EEXIST failure names, or "" for another
// failure.
func npmExists(out string) string {
	code, path := false, ""
	for _, m := range npmExistsRE.FindAllStringSubmatch(out, -1) {
		if m[1] == "code EEXIST" {
			code = true
		} else if path == "" {
			path = strings.TrimSpace(m[2])
		}
	}
	if !code {
		return ""
	}
	return path
}

// inTheWay is npm's EEXIST failure as one line: what is at path, which
// npm does not replace, and the two ways out.
func (in *Installer) inTheWay(ctx context.Context, step, path string) *Error {
	var what bytes.Buffer
	q := shellquote.Word(path)
	probe := `if [ -L ` + q + ` ]; then printf 'a link to %s\n' "$(readlink ` + q + `)"; elif [ -d ` + q + ` ]; then echo 'a directory'; else echo 'a file'; fi`
	if code, err := in.Run(ctx, probe, nil, &what, io.Discard); err != nil || code != 0 {
		what.Reset()
	}
	there := strings.TrimSpace(what.String())
	if there == "" {
		there = "something"
	}
	rm := []string{"rm", shellquote.Word(path)}
	if there == "a directory" {
		rm = []string{"rm", "-r", shellquote.Word(path)}
	}
	k := in.Kind
	return in.failed(step, fmt.Errorf("%s is already there (%s), and npm does not replace what it did not install; replace it with --force, or remove it",
		printable.Line(path, 0), printable.Line(there, 0)), []Step{
		{"replace it: ", Command{Verb: VerbInstallCLI, Kind: k.Name(), Box: in.Box, Force: true}},
		{"or remove it, then run install-cli again: ", Command{Verb: VerbRsh, Box: in.Box, Args: rm}},
	})
}

// echoNPMErrors writes npm's error lines to Log, but its pointer to a
// log file in the box.
func (in *Installer) echoNPMErrors(out string) {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		if npmErrorRE.MatchString(l) && !strings.Contains(l, "complete log of this run") && !strings.HasSuffix(l, "-debug-0.log") && in.Log != nil {
			fmt.Fprintln(in.Log, printable.Line(l, 0))
		}
	}
}

// npmErrorRE matches npm's error lines ("npm error" since npm 10, "npm
// ERR!" before), not its notices and warnings.
var npmErrorRE = regexp.MustCompile(`^npm (?:error|ERR!) \S`)

func hostOf(url string) string {
	h := strings.TrimPrefix(url, "https://")
	h, _, _ = strings.Cut(h, "/")
	return h
}

// tee is w, and Output too.
func (in *Installer) tee(w io.Writer) io.Writer {
	if in.Output == nil {
		return w
	}
	return io.MultiWriter(w, in.Output)
}
