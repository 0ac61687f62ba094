package shim

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// keywords are the ssh_config(5) keywords OpenSSH 9.2 accepts in -o, with
// the deprecated and removed ones it still takes silently. The ones that
// matter to a box are handled by name in configLine; the rest are accepted,
// ignored and printed back by -G.
var keywords = setOf(`
addkeystoagent addressfamily batchmode bindaddress bindinterface
canonicaldomains canonicalizefallbacklocal canonicalizehostname
canonicalizemaxdots canonicalizepermittedcnames casignaturealgorithms
certificatefile checkhostip ciphers clearallforwardings compression
connectionattempts connecttimeout controlmaster controlpath controlpersist
dynamicforward enableescapecommandline enablesshkeysign escapechar
exitonforwardfailure fingerprinthash forkafterauthentication forwardagent
forwardx11 forwardx11timeout forwardx11trusted gatewayports
globalknownhostsfile gssapiauthentication gssapiclientidentity
gssapidelegatecredentials gssapikeyexchange gssapikexalgorithms
gssapirenewalforcesrekey gssapiserveridentity gssapitrustdns hashknownhosts
host hostbasedacceptedalgorithms hostbasedauthentication hostkeyalgorithms
hostkeyalias hostname identitiesonly identityagent identityfile ignoreunknown
include ipqos kbdinteractiveauthentication kbdinteractivedevices
kexalgorithms knownhostscommand localcommand localforward loglevel
logverbose macs match nohostauthenticationforlocalhost
numberofpasswordprompts passwordauthentication permitlocalcommand
permitremoteopen pkcs11provider port preferredauthentications proxycommand
proxyjump proxyusefdpass pubkeyacceptedalgorithms pubkeyauthentication
rekeylimit remotecommand remoteforward requesttty requiredrsasize
revokedhostkeys securitykeyprovider sendenv serveralivecountmax
serveraliveinterval sessiontype setenv stdinnull streamlocalbindmask
streamlocalbindunlink stricthostkeychecking syslogfacility tag tcpkeepalive
tunnel tunneldevice updatehostkeys user userknownhostsfile verifyhostkeydns
visualhostkey xauthlocation

afstokenpassing challengeresponseauthentication cipher compressionlevel
dsaauthentication fallbacktorsh globalknownhostsfile2 hostbasedkeytypes
identityfile2 keepalive kerberosauthentication kerberostgtpassing protocol
protocolkeepalives pubkeyacceptedkeytypes rhostsauthentication
rhostsrsaauthentication rsaauthentication skeyauthentication
smartcarddevice tisauthentication useblacklistedkeys userknownhostsfile2
useprivilegedport useroaming usersh setuptimeout
`)

// ourKeywords are the options of ours, named in OpenSSH's style with a
// Cocoonbox prefix, so that an ssh_config that holds them for OpenSSH's
// ssh can skip them with IgnoreUnknown Cocoonbox*.
var ourKeywords = setOf("cocoonboxresumewindow")

// ParseTime reads an ssh_config time (sshd_config(5) TIME FORMATS): a
// number of seconds, or numbers each followed by a unit, s, m, h, d or w
// in either case ("90", "10m", "1h30m").
func ParseTime(v string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	var total time.Duration
	for rest := v; rest != ""; {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i > 9 {
			return 0, fmt.Errorf("bad time %q", v)
		}
		n, _ := strconv.Atoi(rest[:i])
		unit := time.Second
		if i < len(rest) {
			u, ok := units[rest[i]|0x20]
			if !ok {
				return 0, fmt.Errorf("bad time %q", v)
			}
			unit = u
			i++
		}
		total += time.Duration(n) * unit
		if total > 365*24*time.Hour {
			return 0, fmt.Errorf("bad time %q", v)
		}
		rest = rest[i:]
	}
	if v == "" {
		return 0, fmt.Errorf("bad time %q", v)
	}
	return total, nil
}

// listKeywords are those of the ignored keywords that ssh keeps a list of.
var listKeywords = setOf("identityfile certificatefile")

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// checkValue refuses an option value that could not be one line of
// ssh_config, as -G must print it back on one.
func checkValue(what, v string) error {
	if strings.ContainsAny(v, "\n\r\x00") {
		return usagef("-%s: bad value %q: a value is one line", what, printable(v))
	}
	return nil
}

// configLine applies one -o option: "Key=Value", "Key Value" or
// "Key = Value", the keyword in any case.
func (o *Options) configLine(line string) error {
	line = strings.Trim(line, " \t")
	i := strings.IndexAny(line, "= \t")
	if i < 0 {
		i = len(line)
	}
	key := strings.ToLower(line[:i])
	v := strings.TrimLeft(line[i:], " \t")
	if rest, ok := strings.CutPrefix(v, "="); ok {
		v = strings.TrimLeft(rest, " \t")
	}
	if key == "" {
		return usagef("-o %q: want Key=Value", printable(line))
	}
	if err := checkValue("o", v); err != nil {
		return err
	}
	if !keywords[key] && !ourKeywords[key] {
		for _, p := range o.ignoreUnkn {
			if ok, _ := path.Match(strings.ToLower(p), key); ok {
				return nil
			}
		}
		return usagef("-o: bad configuration option: %s", printable(key))
	}
	if v == "" || strings.HasPrefix(v, "=") {
		return usagef("-o: no argument after keyword %q", key)
	}
	bad := func() error { return usagef("-o %s: bad value %q", key, printable(v)) }
	switch key {
	case "host", "match", "include":
		return usagef("-o %s: not allowed on the command line", key)
	case "localforward":
		// "LISTEN CONNECT", which readconf.c joins with a colon.
		words, err := splitWords(v)
		if err != nil || len(words) != 2 {
			return usagef("-o localforward: bad value %q: want [bind_address:]port host:hostport", printable(v))
		}
		return o.addForward(words[0]+":"+words[1], false)
	case "dynamicforward":
		w, err := oneWord(key, v)
		if err != nil {
			return err
		}
		return o.addForward(w, true)
	case "remoteforward":
		// "LISTEN CONNECT", or "LISTEN" alone for a dynamic one.
		words, err := splitWords(v)
		if err != nil || len(words) < 1 || len(words) > 2 {
			return usagef("-o remoteforward: bad value %q: want [bind_address:]port host:hostport", printable(v))
		}
		return o.addRemoteForward(strings.Join(words, ":"))
	case "exitonforwardfailure":
		return o.boolOption(key, v, &o.ExitOnForwardFailure)
	case "gatewayports":
		return o.boolOption(key, v, &o.GatewayPorts)
	case "proxyjump":
		if v != "none" {
			return usagef("-o proxyjump: a jump host is not supported: a box is reached through the cocoonbox API")
		}
	case "tunnel":
		if !isNo(v) {
			return usagef("-o tunnel: tunnel device forwarding is not supported")
		}
	case "forkafterauthentication":
		return o.boolOption(key, v, &o.ForkAfterAuthentication)
	case "cocoonboxresumewindow":
		d, err := ParseTime(v)
		if err != nil || d <= 0 {
			return usagef("-o cocoonboxresumewindow: bad value %q: want a time such as 10m, 1h or 90 (seconds)", printable(v))
		}
		if o.first(key) {
			o.ResumeWindow = d
			o.other(key, strconv.FormatInt(int64(d/time.Second), 10), false)
		}
		return nil
	case "permitlocalcommand":
		if !isNo(v) {
			return usagef("-o permitlocalcommand: a local command is not supported")
		}
	case "user":
		w, err := oneWord(key, v)
		if err != nil {
			return err
		}
		return o.setUser(w)
	case "port":
		w, err := oneWord(key, v)
		if err != nil {
			return err
		}
		return o.setPort(w)
	case "hostname":
		w, err := oneWord(key, v)
		if err != nil {
			return err
		}
		if err := validName("box", w); err != nil {
			return err
		}
		byConfig(o, key, &o.HostName, w)
		return nil
	case "requesttty":
		return oneOf(o, key, &o.TTY, map[string]TTYMode{"no": TTYNever, "false": TTYNever, "yes": TTYWanted, "true": TTYWanted, "force": TTYForced, "auto": TTYAuto}, strings.ToLower(v), bad)
	case "stdinnull":
		b, ok := parseBool(v)
		if !ok {
			return bad()
		}
		if o.first(key) && b {
			o.StdinNull = true
		}
		return nil
	case "sessiontype":
		return oneOf(o, key, &o.Session, map[string]SessionType{"default": SessionDefault, "none": SessionNone, "subsystem": SessionSubsystem}, strings.ToLower(v), bad)
	case "loglevel":
		return oneOf(o, key, &o.LogLevel, logNames, strings.ToUpper(v), bad)
	case "escapechar":
		e, err := parseEscape(v)
		if err != nil {
			return err
		}
		byConfig(o, key, &o.EscapeChar, e)
		return nil
	case "remotecommand":
		if o.first(key) && v != "none" {
			o.RemoteCommand = v
		}
		return nil
	case "sendenv":
		words, err := splitWords(v)
		if err != nil {
			return usagef("-o sendenv: %v", err)
		}
		for _, w := range words {
			if w == "" || strings.Contains(w, "=") {
				return usagef("-o sendenv: bad variable name %q", printable(w))
			}
			if p, ok := strings.CutPrefix(w, "-"); ok {
				o.SendEnv = removeMatching(o.SendEnv, p)
				continue
			}
			o.SendEnv = append(o.SendEnv, w)
		}
		return nil
	case "setenv":
		words, err := splitWords(v)
		if err != nil {
			return usagef("-o setenv: %v", err)
		}
		for _, w := range words {
			name, _, ok := strings.Cut(w, "=")
			if !ok || name == "" {
				return usagef("-o setenv: %q: want NAME=VALUE", printable(w))
			}
			if !hasName(o.SetEnv, name) {
				o.SetEnv = append(o.SetEnv, w)
			}
		}
		return nil
	case "ignoreunknown":
		if o.first(key) {
			o.ignoreUnkn = strings.Split(v, ",")
		}
	}
	o.other(key, v, false)
	return nil
}

func isNo(v string) bool {
	b, ok := parseBool(v)
	return ok && !b
}

func parseBool(v string) (b, ok bool) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, true
	case "no", "false":
		return false, true
	}
	return false, false
}

func oneWord(key, v string) (string, error) {
	words, err := splitWords(v)
	if err != nil || len(words) != 1 {
		return "", usagef("-o %s: bad value %q: want one word", key, printable(v))
	}
	return words[0], nil
}

func removeMatching(pats []string, p string) []string {
	var out []string
	for _, q := range pats {
		if ok, _ := path.Match(p, q); !ok {
			out = append(out, q)
		}
	}
	return out
}

func hasName(entries []string, name string) bool {
	for _, e := range entries {
		if n, _, _ := strings.Cut(e, "="); n == name {
			return true
		}
	}
	return false
}

// splitWords splits an ssh_config value into words as OpenSSH's argv_split
// does: at spaces and tabs, with "..." and '...' quoting and backslash
// escaping a quote, a backslash or a space.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte(`\"' `, s[i+1]) >= 0 && quote != '\'':
			i++
			w.WriteByte(s[i])
			in = true
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '"' || c == '\'':
			quote = c
			in = true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", printable(s))
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// quoteWord quotes w so that splitWords gives it back, when it has to.
func quoteWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\"'\\") {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		if w[i] == '"' || w[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(w[i])
	}
	b.WriteByte('"')
	return b.String()
}

// WriteConfig prints the configuration as `ssh -G` does: one "keyword
// value" line per setting, keywords in lower case. It reads no file and
// makes no connection.
func (o *Options) WriteConfig(w io.Writer) error {
	user, port := o.User, o.Port
	if user == "" {
		user = "user"
	}
	if port == "" {
		port = "22"
	}
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s %s\n", k, v) }
	line("host", o.Host)
	line("user", user)
	line("hostname", o.Box())
	line("port", port)
	for _, s := range o.Other {
		line(s.Key, s.Value)
	}
	// As ssh -G: the dynamic forwards, the local ones, the remote ones.
	fws := o.ActiveForwards()
	for _, pass := range []func(Forward) bool{
		func(f Forward) bool { return !f.Remote && f.Dynamic },
		func(f Forward) bool { return !f.Remote && !f.Dynamic },
		func(f Forward) bool { return f.Remote },
	} {
		for _, f := range fws {
			if pass(f) {
				b.WriteString(f.String() + "\n")
			}
		}
	}
	line("requesttty", ttyNames[o.TTY])
	line("sessiontype", sessionNames[o.Session])
	stdinNull := "no"
	if o.StdinNull {
		stdinNull = "yes"
	}
	line("stdinnull", stdinNull)
	if o.RemoteCommand != "" {
		line("remotecommand", o.RemoteCommand)
	}
	line("loglevel", o.LogLevel.String())
	for _, p := range o.SendEnv {
		line("sendenv", quoteWord(p))
	}
	for _, e := range o.SetEnv {
		line("setenv", quoteWord(e))
	}
	line("escapechar", escapeName(o.EscapeChar))
	_, err := io.WriteString(w, b.String())
	return err
}
