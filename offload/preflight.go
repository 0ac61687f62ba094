package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// SizeLimit is the work tree size over which offload asks to confirm, in
// bytes (contract "Preflight": 500 MB).
const SizeLimit = 500_000_000

// Preflight is the laptop half of the preflight (contract "Preflight",
// the rows where Mac does the detection). The zero value of each field
// turns its check off.
type Preflight struct {
	// GOOS is the laptop's operating system.
	GOOS string
	// Handover is the hand-over, for its Commands and secrets.
	Handover []byte
	// Secrets are the repo's opted-in entries.
	Secrets []string
	// Environ is the laptop's environment, for the names the code reads.
	Environ []string
	// Listening returns the laptop's listening TCP ports; nil skips the
	// local services check.
	Listening func(ctx context.Context) (map[int]bool, error)
	// Resolve looks up a host name; nil skips names that are not IP
	// literals.
	Resolve func(ctx context.Context, host string) ([]net.IP, error)
	// SplitDNS returns the domains a split-DNS resolver serves (macOS
	// scutil --dns); nil when there are none.
	SplitDNS func(ctx context.Context) []string
	// Size measures the work tree as rsync would send it; nil has the
	// Offloader measure with rsync's dry run.
	Size func(ctx context.Context) (int64, error)
	// SizeOK is the user's kept yes to the size confirm.
	SizeOK bool
	// Docker lists running compose projects' config files; nil skips it.
	// Its error becomes a warning.
	Docker func(ctx context.Context) ([]string, error)
	// Spell is a Command as the user types it (cli's command lines), for
	// the findings whose fix is a command; nil leaves the fix out.
	Spell func(Command) string

	// ignored, when haveIgnored, is the repository's git-ignored paths
	// (Repo.ignored) as the offload read them for its excludes: the
	// checks that need them do not walk the work tree for them again.
	ignored     []string
	haveIgnored bool
}

// ignoredPaths is Repo.ignored's list, read once an offload.
func (p *Preflight) ignoredPaths(ctx context.Context, r *Repo) ([]string, error) {
	if p.haveIgnored {
		return p.ignored, nil
	}
	return r.ignored(ctx)
}

// Run runs every check on r and returns the findings, blocks first.
// Errors of a check become a warn finding naming the check, so that a
// broken probe never passes silently.
func (p *Preflight) Run(ctx context.Context, r *Repo) []agentwire.Finding {
	var fs []agentwire.Finding
	add := func(f ...agentwire.Finding) { fs = append(fs, f...) }
	// The two probes that read the whole tree (git grep for secrets, the
	// size's rsync dry run) run beside the others; their findings keep
	// their place.
	secrets := make(chan []agentwire.Finding, 1)
	go func() { secrets <- p.secrets(ctx, r) }()
	type sized struct {
		n   int64
		err error
	}
	size := make(chan sized, 1)
	measure := p.Size != nil && !p.SizeOK
	if measure {
		go func() {
			n, err := p.Size(ctx)
			size <- sized{n, err}
		}()
	}
	files, err := r.worktreeFiles(ctx)
	if err != nil {
		add(agentwire.Finding{Check: "files", Outcome: agentwire.Warn, Detail: err.Error()})
	}
	add(p.macOnly(r, files)...)
	ign, ignErr := p.ignoredPaths(ctx, r)
	env := r.readEnvFiles(files, ign, ignErr)
	add(p.localServices(ctx, r, env)...)
	add(p.vpnHosts(ctx, r, env)...)
	add(<-secrets...)
	add(lfsSubmodules(r)...)
	if measure {
		sz := <-size
		n, err := sz.n, sz.err
		switch {
		case err != nil:
			add(agentwire.Finding{Check: "size", Outcome: agentwire.Warn, Detail: "measuring the work tree: " + err.Error()})
		case n > SizeLimit:
			add(agentwire.Finding{Check: "size", Outcome: agentwire.Confirm, Detail: fmt.Sprintf("the work tree to send is %d MB, over %d MB", n/1_000_000, SizeLimit/1_000_000)})
		}
	}
	slices.SortStableFunc(fs, func(a, b agentwire.Finding) int { return outcomeRank(a.Outcome) - outcomeRank(b.Outcome) })
	return fs
}

func outcomeRank(o string) int {
	switch o {
	case agentwire.Block:
		return 0
	case agentwire.Warn:
		return 1
	}
	return 2
}

// worktreeFiles lists the files offload sends: tracked and untracked,
// not ignored.
func (r *Repo) worktreeFiles(ctx context.Context) ([]string, error) {
	out, err := r.git.run(ctx, nil, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	return slices.Compact(nulList(out)), nil
}

// ignored lists git-ignored paths relative to the top, directories
// ending in / (git ls-files -oi --exclude-standard --directory).
func (r *Repo) ignored(ctx context.Context) ([]string, error) {
	out, err := r.git.run(ctx, nil, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
	if err != nil {
		return nil, err
	}
	return nulList(out), nil
}

var appleCommands = []string{"xcodebuild", "xcrun", "security", "launchctl", "open"}

// macOnly finds Apple targets in the files and macOS commands in the
// hand-over's Commands section.
func (p *Preflight) macOnly(r *Repo, files []string) []agentwire.Finding {
	var fs []agentwire.Finding
	for _, line := range handoverSection(p.Handover, "## Commands") {
		if c := commandUsing(line, appleCommands); c != "" {
			fs = append(fs, agentwire.Finding{Check: "macos_only", Outcome: agentwire.Block, Detail: fmt.Sprintf("the hand-over's Commands run %s, which needs macOS: %s", c, strings.TrimSpace(line))})
			break
		}
	}
	var markers []string
	for _, f := range files {
		parts := strings.Split(f, "/")
		for i, c := range parts {
			last := i == len(parts)-1
			switch {
			case !last && (strings.HasSuffix(c, ".xcodeproj") || strings.HasSuffix(c, ".xcworkspace")):
				markers = append(markers, strings.Join(parts[:i+1], "/"))
			case !last && c == "fastlane":
				markers = append(markers, strings.Join(parts[:i+1], "/")+"/")
			case last && c == "Podfile":
				markers = append(markers, f)
			case last && c == "Package.swift" && appleOnlyPackage(filepath.Join(r.Top, f)):
				markers = append(markers, f+" (Apple platforms only)")
			}
		}
	}
	slices.Sort(markers)
	markers = slices.Compact(markers)
	if len(markers) > 0 {
		if len(markers) > 3 {
			markers = append(markers[:3], "…")
		}
		fs = append(fs, agentwire.Finding{Check: "macos_only", Outcome: agentwire.Warn, Detail: "the repository has an Apple target, which the Linux box cannot build: " + strings.Join(markers, ", ")})
	}
	return fs
}

var platformsRE = regexp.MustCompile(`(?s)platforms\s*:\s*\[(.*?)\]\s*[,)]`)

// appleOnlyPackage reports a Package.swift whose platforms list names
// only Apple platforms. A package without one builds on Linux too.
func appleOnlyPackage(p string) bool {
	b, err := readSmall(p)
	if err != nil {
		return false
	}
	m := platformsRE.FindSubmatch(b)
	if m == nil {
		return false
	}
	// The list's items at depth 0: .macOS(.v13), .linux, ...
	var names []string
	depth := 0
	for i, c := range m[1] {
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '.' && depth == 0:
			j := i + 1
			for j < len(m[1]) && (m[1][j] == '_' || m[1][j] >= 'a' && m[1][j] <= 'z' || m[1][j] >= 'A' && m[1][j] <= 'Z') {
				j++
			}
			names = append(names, string(m[1][i+1:j]))
		}
	}
	for _, n := range names {
		switch n {
		case "iOS", "macOS", "tvOS", "watchOS", "visionOS", "macCatalyst", "driverKit":
		default:
			return false
		}
	}
	return len(names) > 0
}

// commandUsing returns the first of names that the shell line runs as a
// command: its first word, or one after a separator or sudo.
func commandUsing(line string, names []string) string {
	line = strings.TrimSpace(strings.Trim(strings.TrimSpace(line), "`"))
	line = strings.TrimPrefix(strings.TrimPrefix(line, "- "), "$ ")
	cmdPos := true
	for _, w := range strings.Fields(line) {
		w = strings.Trim(w, "`()")
		switch {
		case w == "&&" || w == "||" || w == ";" || w == "|" || w == "sudo" || w == "env" || w == "exec" || w == "time":
			cmdPos = true
			continue
		case cmdPos && strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
			continue // VAR=value before the command
		}
		if cmdPos && slices.Contains(names, path.Base(strings.TrimRight(w, ";"))) {
			return path.Base(strings.TrimRight(w, ";"))
		}
		cmdPos = strings.HasSuffix(w, ";") || strings.HasSuffix(w, "&&") || strings.HasSuffix(w, "|")
	}
	return ""
}

// handoverSection returns the lines under heading up to the next "## ".
func handoverSection(h []byte, heading string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(string(h), "\n") {
		t := strings.TrimRight(l, " \t\r")
		if strings.HasPrefix(t, "## ") {
			in = t == heading
			continue
		}
		if in && strings.TrimSpace(t) != "" {
			out = append(out, t)
		}
	}
	return out
}

// envFile is a file whose text names ports and hosts: .env*, compose and
// config files.
type envFile struct {
	rel     string
	compose bool
	text    []byte
}

// readEnvFiles reads the top's .env* files (ignored ones too), compose
// files and config files at the top and in config/, each up to 1 MiB:
// files are the work tree's (worktreeFiles), ign its git-ignored paths,
// unless ignErr says they could not be listed.
func (r *Repo) readEnvFiles(files, ign []string, ignErr error) []envFile {
	seen := map[string]bool{}
	var out []envFile
	consider := func(rel string) {
		if seen[rel] || len(out) >= 200 {
			return
		}
		seen[rel] = true
		base := path.Base(rel)
		dir := path.Dir(rel)
		compose := strings.HasPrefix(base, "docker-compose") || strings.HasPrefix(base, "compose.") || strings.HasPrefix(base, "compose-")
		compose = compose && (strings.HasSuffix(base, ".yml") || strings.HasSuffix(base, ".yaml"))
		env := strings.HasPrefix(base, ".env") && !isEnvTemplate(base)
		config := (dir == "." || dir == "config") && hasExt(base, ".toml", ".yaml", ".yml", ".json", ".ini", ".conf", ".cfg", ".properties")
		if !(compose || env || config) || strings.HasSuffix(base, "lock.json") || base == "package.json" {
			return
		}
		b, err := readSmall(filepath.Join(r.Top, filepath.FromSlash(rel)))
		if err != nil {
			return
		}
		out = append(out, envFile{rel: rel, compose: compose, text: b})
	}
	for _, f := range files {
		if !strings.Contains(strings.TrimPrefix(f, "config/"), "/") {
			consider(f)
		}
	}
	if ignErr == nil {
		for _, f := range ign {
			if !strings.Contains(f, "/") {
				consider(f)
			}
		}
	}
	return out
}

func isEnvTemplate(base string) bool {
	return hasExt(base, ".example", ".sample", ".template", ".dist", ".defaults")
}

func hasExt(base string, exts ...string) bool {
	for _, e := range exts {
		if strings.HasSuffix(base, e) {
			return true
		}
	}
	return false
}

func readSmall(p string) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(io.LimitReader(f, 1<<20))
	return b.Bytes(), err
}

var (
	localPortRE   = regexp.MustCompile(`(?i)(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\]|host\.docker\.internal):(\d{2,5})\b`)
	namedPortRE   = regexp.MustCompile(`(?m)^\s*(?:export\s+)?([A-Za-z0-9_]*PORT[A-Za-z0-9_]*)\s*[=:]\s*["']?(\d{2,5})\b`)
	composePortRE = regexp.MustCompile(`(?m)^\s*-\s*["']?(?:[\d.]+:)?(\d{2,5}):\d{1,5}(?:/tcp)?["']?\s*$`)
)

// localServices warns, per port, about ports the repo's files name that
// listen on this laptop, and about a running compose project of the repo.
func (p *Preflight) localServices(ctx context.Context, r *Repo, files []envFile) []agentwire.Finding {
	var fs []agentwire.Finding
	if p.Listening != nil {
		named := map[int]string{}
		note := func(port, where string) {
			n, err := strconv.Atoi(port)
			if err == nil && n > 0 && n < 65536 {
				if _, ok := named[n]; !ok {
					named[n] = where
				}
			}
		}
		for _, f := range files {
			for _, m := range namedPortRE.FindAllSubmatch(f.text, -1) {
				note(string(m[2]), fmt.Sprintf("%s in %s", m[1], f.rel))
			}
			for _, m := range localPortRE.FindAllSubmatch(f.text, -1) {
				note(string(m[1]), f.rel)
			}
			if f.compose {
				for _, m := range composePortRE.FindAllSubmatch(f.text, -1) {
					note(string(m[1]), f.rel)
				}
			}
		}
		if len(named) > 0 {
			listening, err := p.Listening(ctx)
			if err != nil {
				fs = append(fs, agentwire.Finding{Check: "local_services", Outcome: agentwire.Warn, Detail: "listing the listening ports: " + err.Error()})
			}
			ports := make([]int, 0, len(named))
			for n := range named {
				if listening[n] {
					ports = append(ports, n)
				}
			}
			slices.Sort(ports)
			for _, n := range ports {
				fs = append(fs, agentwire.Finding{Check: "local_services", Outcome: agentwire.Warn, Detail: fmt.Sprintf("port %d (%s) is a service listening on this laptop; the box cannot reach it", n, named[n])})
			}
		}
	}
	if p.Docker != nil {
		cfgs, err := p.Docker(ctx)
		if err != nil {
			fs = append(fs, agentwire.Finding{Check: "local_services", Outcome: agentwire.Warn, Detail: "docker compose ls failed, so running compose projects were not checked: " + err.Error()})
		}
		for _, cfg := range cfgs {
			if rel, err := filepath.Rel(r.Top, cfg); err == nil && !strings.HasPrefix(rel, "..") {
				fs = append(fs, agentwire.Finding{Check: "local_services", Outcome: agentwire.Warn, Detail: fmt.Sprintf("a docker compose project of this repository is running here (%s); the box cannot reach it", rel)})
			}
		}
	}
	return fs
}

var (
	urlHostRE = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	scpHostRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@([A-Za-z0-9.-]+):`)
)

// vpnHosts warns about hosts in the remotes, config and .env* files that
// resolve to private addresses, or that a split-DNS resolver serves.
func (p *Preflight) vpnHosts(ctx context.Context, r *Repo, files []envFile) []agentwire.Finding {
	where := map[string]string{}
	add := func(host, src string) {
		host = strings.ToLower(strings.Trim(host, "[]"))
		if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return
		}
		if _, ok := where[host]; !ok {
			where[host] = src
		}
	}
	if out, err := r.git.run(ctx, nil, "config", "-z", "--get-regexp", `^remote\..*\.(push)?url$`); err == nil {
		for _, kv := range nulList(out) {
			k, v, _ := strings.Cut(kv, "\n")
			if m := scpHostRE.FindStringSubmatch(v); m != nil {
				add(m[1], k)
			} else if u, err := url.Parse(v); err == nil {
				add(u.Hostname(), k)
			}
		}
	}
	for _, f := range files {
		for _, m := range urlHostRE.FindAll(f.text, 50) {
			if u, err := url.Parse(string(m)); err == nil {
				add(u.Hostname(), f.rel)
			}
		}
	}
	var split []string
	if p.SplitDNS != nil {
		split = p.SplitDNS(ctx)
	}
	hosts := make([]string, 0, len(where))
	for h := range where {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	if len(hosts) > 20 {
		hosts = hosts[:20]
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var fs []agentwire.Finding
	for _, h := range hosts {
		if d := splitDomain(h, split); d != "" {
			fs = append(fs, agentwire.Finding{Check: "vpn_hosts", Outcome: agentwire.Warn, Detail: fmt.Sprintf("%s (%s) resolves through this laptop's resolver for %s; the box cannot reach it", h, where[h], d)})
			continue
		}
		var ips []net.IP
		if ip := net.ParseIP(h); ip != nil {
			ips = []net.IP{ip}
		} else if p.Resolve != nil && strings.Contains(h, ".") {
			ips, _ = p.Resolve(ctx, h)
		}
		for _, ip := range ips {
			if privateIP(ip) {
				fs = append(fs, agentwire.Finding{Check: "vpn_hosts", Outcome: agentwire.Warn, Detail: fmt.Sprintf("%s (%s) is at the private address %s, likely reached through a VPN; the box cannot reach it", h, where[h], ip)})
				break
			}
		}
	}
	return fs
}

func splitDomain(host string, domains []string) string {
	for _, d := range domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return d
		}
	}
	return ""
}

var cgnat = &net.IPNet{IP: net.IPv4(100, 64, 0, 0), Mask: net.CIDRMask(10, 32)}

// privateIP is RFC 1918, RFC 6598 (carrier-grade NAT, used by overlay
// VPNs) and RFC 4193 space; loopback is a local service, not a VPN.
func privateIP(ip net.IP) bool {
	return !ip.IsLoopback() && (ip.IsPrivate() || cgnat.Contains(ip))
}

var envReadRE = regexp.MustCompile(`os\.Getenv\("([A-Z][A-Z0-9_]*)"\)|os\.LookupEnv\("([A-Z][A-Z0-9_]*)"\)|process\.env\.([A-Z][A-Z0-9_]*)|process\.env\[["']([A-Z][A-Z0-9_]*)["']\]|std::env::var(?:_os)?\("([A-Z][A-Z0-9_]*)"\)|os\.environ(?:\.get\(|\[)["']([A-Z][A-Z0-9_]*)["']|os\.getenv\(["']([A-Z][A-Z0-9_]*)["']|ENV\[["']([A-Z][A-Z0-9_]*)["']\]`)
var secretNameRE = regexp.MustCompile(`KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE`)

// secrets warns about git-ignored .env* files not opted in, secrets the
// hand-over says are needed, and secret-looking variables the code reads
// that are set in this shell, which the box will not have.
func (p *Preflight) secrets(ctx context.Context, r *Repo) []agentwire.Finding {
	var fs []agentwire.Finding
	if ign, err := p.ignoredPaths(ctx, r); err == nil {
		for _, f := range ign {
			base := path.Base(f)
			if strings.HasSuffix(f, "/") || !strings.HasPrefix(base, ".env") || isEnvTemplate(base) {
				continue
			}
			if !slices.Contains(p.Secrets, "file:"+f) {
				fs = append(fs, agentwire.Finding{Check: "secrets", Outcome: agentwire.Warn, Detail: p.withFix(f+" is git-ignored, so it stays on this laptop",
					Step{"opt in with: ", Command{Verb: VerbSecretsAdd, Args: []string{"file:" + f}}})})
			}
		}
	}
	if f, ok := p.secretsNeededFinding(p.Handover, p.Secrets); ok {
		fs = append(fs, f)
	}
	if len(p.Environ) > 0 {
		set := map[string]bool{}
		for _, kv := range p.Environ {
			k, v, _ := strings.Cut(kv, "=")
			set[k] = v != ""
		}
		out, err := r.git.run(ctx, nil, "grep", "-h", "-I", "-F", "--no-color", "-e", "os.Getenv(", "-e", "os.LookupEnv(",
			"-e", "process.env", "-e", "std::env::var", "-e", "os.environ", "-e", "os.getenv(", "-e", "ENV[", "--", ":!*.min.js")
		if err == nil {
			var names []string
			for _, m := range envReadRE.FindAllStringSubmatch(out, -1) {
				for _, n := range m[1:] {
					if n != "" && set[n] && secretNameRE.MatchString(n) && n != "COCOONBOX_TOKEN" {
						names = append(names, n)
					}
				}
			}
			slices.Sort(names)
			names = slices.Compact(names)
			for _, n := range names {
				fs = append(fs, agentwire.Finding{Check: "secrets", Outcome: agentwire.Warn, Detail: fmt.Sprintf("the code reads %s, set in this shell; the box session will not have it", n)})
			}
		}
	}
	return fs
}

// secretsNeededFinding is the warning when hand-over h says secrets are
// needed and none of secrets (the repo's opted-in entries) is there. p
// may be nil.
func (p *Preflight) secretsNeededFinding(h []byte, secrets []string) (agentwire.Finding, bool) {
	names := secretsNeeded(h)
	if names == "" || len(secrets) > 0 {
		return agentwire.Finding{}, false
	}
	return agentwire.Finding{Check: "secrets", Outcome: agentwire.Warn, Detail: p.withFix("the hand-over says secrets are needed ("+names+") and none is opted in",
		Step{"see: ", Command{Verb: VerbSecretsAdd}})}, true
}

// withFix is a finding's detail with the step that fixes it after a
// semicolon, its commands as Spell types them; detail alone when p or
// its Spell is nil.
func (p *Preflight) withFix(detail string, fix Step) string {
	if p == nil || p.Spell == nil {
		return detail
	}
	return detail + "; " + fix.Text(p.Spell)
}

// secretsNeeded returns the names of the hand-over's first line that
// starts "Secrets needed:" (list and emphasis marks aside), or "" when
// there is none or it says none.
func secretsNeeded(h []byte) string {
	for _, l := range strings.Split(string(h), "\n") {
		t := strings.TrimLeft(strings.TrimSpace(l), "-*_>` \t")
		if len(t) < len("secrets needed") || !strings.EqualFold(t[:len("secrets needed")], "secrets needed") {
			continue
		}
		names := strings.TrimSpace(strings.TrimLeft(t[len("secrets needed"):], ":*_` \t"))
		names = strings.TrimSpace(strings.TrimRight(names, ". \t"))
		if strings.EqualFold(names, "none") {
			return ""
		}
		return names
	}
	return ""
}

// lfsSubmodules warns that LFS content and submodules are not carried.
func lfsSubmodules(r *Repo) []agentwire.Finding {
	var fs []agentwire.Finding
	if b, err := readSmall(filepath.Join(r.Top, ".gitattributes")); err == nil && bytes.Contains(b, []byte("filter=lfs")) {
		fs = append(fs, agentwire.Finding{Check: "lfs", Outcome: agentwire.Warn, Detail: "the repository uses Git LFS (filter=lfs in .gitattributes); LFS content is not carried, the box sees pointer files"})
	}
	if _, err := os.Lstat(filepath.Join(r.Top, ".gitmodules")); err == nil {
		fs = append(fs, agentwire.Finding{Check: "submodules", Outcome: agentwire.Warn, Detail: "the repository has submodules (.gitmodules); they are not carried"})
	}
	return fs
}

// ComposeProjects returns the config files of the running docker compose
// projects. No docker, a docker without the compose plugin, or a docker
// daemon that is not running, is none running: nil and no error. Any other failure of docker compose ls (a
// timeout, an answer that does not parse) is an error, which the
// preflight reports as a warning.
func ComposeProjects(ctx context.Context, environ []string) ([]string, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var errb bytes.Buffer
	c := exec.CommandContext(ctx, "docker", "compose", "ls", "--format", "json")
	c.Env = HostEnv(environ, false)
	c.Stderr = &errb
	out, err := c.Output()
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		first, _, _ := strings.Cut(msg, "\n")
		switch {
		case strings.Contains(msg, "Cannot connect to the Docker daemon") || strings.Contains(msg, "docker daemon running"):
			return nil, nil
		case strings.Contains(first, "is not a docker command") || strings.HasPrefix(first, "unknown flag"):
			return nil, nil // no compose plugin: docker takes "compose" for an unknown word
		case ctx.Err() != nil:
			return nil, errors.New("no answer in 3 s")
		case first == "":
			return nil, err
		}
		return nil, errors.New(first)
	}
	var ps []struct {
		ConfigFiles string `json:"ConfigFiles"`
	}
	if err := json.Unmarshal(out, &ps); err != nil {
		return nil, fmt.Errorf("its answer does not parse: %w", err)
	}
	var files []string
	for _, p := range ps {
		files = append(files, strings.Split(p.ConfigFiles, ",")...)
	}
	return files, nil
}
