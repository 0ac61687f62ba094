package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/internal/formtest"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// TestBrowser runs testdata/browser/*.txtar: sign-in through Debian's
// chromium, headless, driven by the browse helper as the user's $BROWSER.
// chromium is installed by scripts/deps.sh when missing (as root), else
// the test fails with the command to run.
func TestBrowser(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		out, err := exec.Command("../scripts/deps.sh", "chromium").CombinedOutput()
		if err != nil {
			t.Fatalf("the browser tests need chromium, and scripts/deps.sh could not install it: %v\n%s", err, out)
		}
	}
	p := params(t, "testdata/browser")
	testscript.Run(t, p)
}

// stdoutvar NAME REGEXP sets $NAME to the first group of REGEXP in the
// last command's stdout.
func stdoutvar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: stdoutvar NAME REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("stdoutvar: no match for %q in stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// waitfile PATH waits until PATH exists (at most two minutes).
func waitfile() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: waitfile PATH")
		os.Exit(2)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(os.Args[1]); err == nil {
			return
		}
	}
	fmt.Fprintf(os.Stderr, "waitfile: %s did not appear\n", os.Args[1])
	os.Exit(1)
}

// browse URL is the $BROWSER of the browser scripts. It opens URL in a
// fresh headless chromium (its JavaScript off when $BROWSE_SCRIPT is
// "off"), signs in with the local box's code from $BOX_STATE, clicks
// $BROWSE_ACTION ("allow" or "deny") on the consent page, and waits for
// the CLI's loopback page. It appends what it saw to $WORK/browse.log,
// then creates $WORK/browse.done. If anything fails it answers the CLI's
// loopback port with an error, so login never hangs.
func browse() { browseWith(drive) }

// formbrowse URL is browse with a browser that runs no script
// (internal/formtest): net/http, a cookie jar and the page's HTML forms.
func formbrowse() { browseWith(driveForms) }

func browseWith(drive func(link, action string, logf func(string, ...any)) error) {
	work := os.Getenv("WORK")
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(filepath.Join(work, "browse.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintf(f, format+"\n", args...)
			f.Close()
		}
	}
	defer os.WriteFile(filepath.Join(work, "browse.done"), nil, 0o644)
	if err := drive(os.Args[1], os.Getenv("BROWSE_ACTION"), logf); err != nil {
		logf("error: %v", err)
		failLogin(os.Args[1])
	}
}

// driveForms is drive without a script: it fills the sign-in form and
// presses the consent form's button as a browser without JavaScript does.
func driveForms(link, action string, logf func(string, ...any)) error {
	if action != "allow" && action != "deny" {
		return fmt.Errorf("BROWSE_ACTION is %q, want allow or deny", action)
	}
	code, err := localbox.SignInCode(os.Getenv("BOX_STATE"))
	if err != nil {
		return err
	}
	b := formtest.New()
	p, err := b.Get(link)
	if err != nil {
		return err
	}
	f, err := p.Form("signin")
	if err != nil {
		return err
	}
	f.Values.Set("code", code)
	if p, err = b.Submit(f, "signin-submit"); err != nil {
		return err
	}
	if f, err = p.Form("consent"); err != nil {
		return fmt.Errorf("%w (%d: %s)", err, p.Status, p.Text("message"))
	}
	logf("question: %s", p.Text("question"))
	if p, err = b.Submit(f, action); err != nil {
		return err
	}
	logf("landed: %s://%s%s", p.URL.Scheme, p.URL.Hostname(), p.URL.Path)
	logf("result: %s", p.Text("result"))
	logf("cookies: %d", len(b.Client.Jar.Cookies(&url.URL{Scheme: "http", Host: "127.0.0.1"})))
	return nil
}

func drive(link, action string, logf func(string, ...any)) error {
	if action != "allow" && action != "deny" {
		return fmt.Errorf("BROWSE_ACTION is %q, want allow or deny", action)
	}
	code, err := localbox.SignInCode(os.Getenv("BOX_STATE"))
	if err != nil {
		return err
	}
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
	}
	if os.Getenv("BROWSE_SCRIPT") == "off" {
		opts = append(opts, chromedp.Flag("blink-settings", "scriptEnabled=false"))
	}
	// Over TLS the browser trusts the script's local box by its key, as a
	// user's browser trusts a CA in the system's store.
	if spki := os.Getenv("TLS_SPKI"); spki != "" {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", spki))
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("code")),
		chromedp.SendKeys(chromedp.ID("code"), code),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("allow")),
	)
	if err != nil {
		return fmt.Errorf("sign in on the consent page: %w", err)
	}
	question, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("question")))
	if err != nil {
		return err
	}
	logf("question: %s", question)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID(action)),
		chromedp.WaitVisible(chromedp.ID("result")),
	)
	if err != nil {
		return fmt.Errorf("click %s: %w", action, err)
	}
	result, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("result")))
	if err != nil {
		return err
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return err
	}
	u, _ := url.Parse(loc)
	logf("landed: %s://%s%s", u.Scheme, u.Hostname(), u.Path)
	logf("result: %s", result)
	return nil
}

// failLogin answers the CLI's loopback redirect with an error.
func failLogin(link string) {
	u, err := url.Parse(link)
	if err != nil {
		return
	}
	q := u.Query()
	v := url.Values{"error": {"browse_failed"}, "state": {q.Get("state")}, "iss": {u.Scheme + "://" + u.Host}}
	if resp, err := http.Get(q.Get("redirect_uri") + "?" + v.Encode()); err == nil {
		resp.Body.Close()
	}
}
