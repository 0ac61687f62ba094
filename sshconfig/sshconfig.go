// Package sshconfig writes the marked block of `cocoonbox ssh-config`
// into an ssh_config(5) file: one wildcard Host block whose ProxyCommand
// is `cocoonbox-ssh --stdio`, pinned to the user's host key in a
// known_hosts file of ours, so OpenSSH keeps StrictHostKeyChecking on. It
// parses and rewrites the file's text; the caller reads and writes it
// (docs/ssh-config.md).
package sshconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// The lines that open and close the block. Everything between them is
// ours and is rewritten whole.
const (
	BeginMarker = "# ------------ BEGIN cocoonbox ssh-config ------------"
	EndMarker   = "# ------------ END cocoonbox ssh-config ------------"
)

// CreatedMarker is the block's line when ssh-config created the file:
// removing the block then removes the file too, if nothing else is in it.
const CreatedMarker = "# ssh-config created this file: --remove deletes it while it holds nothing else."

// DefaultSuffix is the host suffix of the block's pattern: `Host
// *.cocoonbox`, so `ssh main.cocoonbox` reaches box main.
const DefaultSuffix = ".cocoonbox"

// HostKeyAlias is the name OpenSSH looks the host key up under, whatever
// the box and port: the block's HostKeyAlias, and the host field of the
// known_hosts line.
const HostKeyAlias = "cocoonbox"

// Options are what the block says.
type Options struct {
	// Suffix is the host suffix, such as ".cocoonbox"; empty means
	// DefaultSuffix.
	Suffix string
	// SSHPath is the absolute path of cocoonbox-ssh, the ProxyCommand.
	SSHPath string
	// KnownHosts is the absolute path of our known_hosts file.
	KnownHosts string
	// Ciphers, if not empty, is the block's Ciphers line: the server's
	// fastest first (sshserve.ClientCiphers).
	Ciphers string
	// KexAlgorithms, if not empty, is the block's KexAlgorithms line: the
	// key exchanges the server speaks (sshserve.ClientKexAlgorithms).
	KexAlgorithms string
	// GOOS is the platform of the ssh that reads the block: "windows"
	// quotes the ProxyCommand for Win32-OpenSSH, anything else for a
	// POSIX shell.
	GOOS string
	// Created adds CreatedMarker: the file did not exist before the
	// block, or its block already says so.
	Created bool
}

var suffixRE = regexp.MustCompile(`^\.[A-Za-z0-9][A-Za-z0-9.-]*$`)

func (o Options) suffix() string {
	if o.Suffix == "" {
		return DefaultSuffix
	}
	return o.Suffix
}

// ErrEnvVar is wrapped by Check's error for a known_hosts path holding
// "${": OpenSSH expands ${NAME} in UserKnownHostsFile from the
// environment (ssh_config(5), ENVIRONMENT VARIABLES), ignores the line
// when NAME is unset, and has no escape for it.
var ErrEnvVar = errors.New(`holds "${", which OpenSSH reads as an environment variable there and nothing can escape`)

// Check reports a suffix that is not a dot and a host name, or a path
// that is not absolute or holds a control character (no ssh_config line
// could carry it), or a known_hosts path with "${" (ErrEnvVar). The
// ProxyCommand's path may hold anything else: OpenSSH expands no ${} in
// ProxyCommand, and the shell it runs it with sees it single-quoted.
func (o Options) Check() error {
	if !suffixRE.MatchString(o.suffix()) {
		return fmt.Errorf("bad suffix %q: want a dot and a host name, such as .cocoonbox", o.Suffix)
	}
	for _, p := range []struct{ what, path string }{{"cocoonbox-ssh", o.SSHPath}, {"known_hosts", o.KnownHosts}} {
		if !isAbs(p.path) {
			return fmt.Errorf("the %s path %q is not absolute", p.what, p.path)
		}
		if strings.ContainsFunc(p.path, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return fmt.Errorf("the %s path %q holds a control character, which no ssh_config line can carry", p.what, p.path)
		}
	}
	if o.GOOS == "windows" && strings.Contains(o.SSHPath, `"`) {
		return fmt.Errorf("the cocoonbox-ssh path %q holds a double quote, which Windows cannot pass in a ProxyCommand", o.SSHPath)
	}
	if strings.Contains(o.KnownHosts, "${") {
		return fmt.Errorf("the known_hosts path %q %w", o.KnownHosts, ErrEnvVar)
	}
	return nil
}

// isAbs accepts a Unix path or a Windows one with a drive letter.
func isAbs(p string) bool {
	return strings.HasPrefix(p, "/") || len(p) > 2 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// Block is the whole block, markers included, each line ending in "\n".
// Check must have accepted o.
func Block(o Options) string {
	proxy := percent(proxyQuote(o.GOOS, o.SSHPath)) + " --stdio"
	if o.suffix() != DefaultSuffix {
		proxy += " --suffix " + o.suffix()
	}
	lines := []string{
		BeginMarker,
		"# Written by `cocoonbox ssh-config`: run it again to change this block,",
		"# or `cocoonbox ssh-config --remove` to take it out (docs/ssh-config.md).",
		"Host *" + o.suffix(),
		// %h is the host, main.cocoonbox (no HostName changes it):
		// cocoonbox-ssh takes the suffix off to name the box. Not %n, the
		// host as typed, which Paramiko (so Fabric) does not expand.
		"  ProxyCommand " + proxy + " %h",
		"  User user",
		// One host key for every box, pinned under one name.
		"  UserKnownHostsFile " + configQuote(percent(o.KnownHosts)),
		"  HostKeyAlias " + HostKeyAlias,
		"  StrictHostKeyChecking yes",
		"  UpdateHostKeys no",
		"  CheckHostIP no",
		// The server on ssh's stdio lets the user in with "none": the box
		// checks the cocoonbox token. Nothing is ever to be typed.
		"  PasswordAuthentication no",
		"  KbdInteractiveAuthentication no",
		"  ForwardAgent no",
		"  ForwardX11 no",
		// Our values come before the user's own "Host *" ones, so these
		// win over choices that do not fit our server: its one host key
		// is ed25519, and the ProxyCommand speaks SSH on its stdio rather
		// than passing back a socket.
		"  HostKeyAlgorithms ssh-ed25519",
		"  ProxyUseFdpass no",
		// Ends the block's Host: the user's lines after it are global again.
		"Host *",
		EndMarker,
	}
	if o.Created {
		lines = slices.Insert(lines, 3, CreatedMarker)
	}
	if o.KexAlgorithms != "" {
		lines = slices.Insert(lines, slices.Index(lines, "  User user")+1, "  KexAlgorithms "+o.KexAlgorithms)
	}
	if o.Ciphers != "" {
		lines = slices.Insert(lines, slices.Index(lines, "  User user")+1, "  Ciphers "+o.Ciphers)
	}
	return strings.Join(lines, "\n") + "\n"
}

// percent escapes % for ssh_config's %-tokens.
func percent(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// proxyQuote quotes the program s of a ProxyCommand for goos's ssh.
func proxyQuote(goos, s string) string {
	if goos == "windows" {
		return windowsQuote(s)
	}
	return ShellQuote(s)
}

// windowsQuote double-quotes s when it holds a blank. Win32-OpenSSH runs
// a ProxyCommand with no shell: it hands the line to CreateProcessW, which
// reads the program's name up to the first blank, or between double
// quotes; backslashes are path separators there, not escapes, and no
// Windows file name holds a double quote.
func windowsQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t") {
		return s
	}
	return `"` + s + `"`
}

// ShellQuote single-quotes s for a POSIX shell, such as the one ssh runs
// ProxyCommand with, unless it holds only characters no shell reads.
//
// Its bare bytes are its own (% but not = or ,): the Host blocks users
// already have were written with them, and a rewrite must match them.
func ShellQuote(s string) string { return shellquote.WordWith(s, "/._-+:@%") }

// configQuote double-quotes s for an ssh_config value when it needs it,
// with a backslash before " and \, as OpenSSH's argv_split reads them.
func configQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\#") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// MarkerError is a file whose markers cannot be one block: an unclosed
// BEGIN, an END with no BEGIN, or two blocks. Line numbers count from 1.
type MarkerError struct {
	Problem string
	Line    int
}

func (e *MarkerError) Error() string {
	return fmt.Sprintf("the cocoonbox block's markers are broken: %s (line %d)", e.Problem, e.Line)
}

// File is an ssh_config file's text split around the block.
type File struct {
	// before and after are the text outside the block; block is the
	// block's text, markers included, when the file has one.
	before, block, after string
	has                  bool
	// top: nothing but empty and comment lines comes before the block.
	top bool
	eol string
}

// Parse splits an ssh_config file's text around the block. Broken markers
// are a *MarkerError.
func Parse(text string) (*File, error) {
	f := &File{eol: "\n"}
	if strings.Contains(text, "\r\n") {
		f.eol = "\r\n"
	}
	lines := strings.SplitAfter(text, "\n")
	m := markers{begin: -1, end: -1, top: true}
	for i, l := range lines {
		if err := m.line(i, l); err != nil {
			return nil, err
		}
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	f.top = m.top
	join := func(ls []string) string { return strings.Join(ls, "") }
	if m.begin < 0 {
		f.after = text
		return f, nil
	}
	f.has = true
	f.before, f.block, f.after = join(lines[:m.begin]), join(lines[m.begin:m.end+1]), join(lines[m.end+1:])
	return f, nil
}

// markers finds the block's marker lines, one line at a time.
type markers struct {
	// begin and end are the marker lines' indexes, -1 until seen.
	begin, end int
	// top: nothing but empty and comment lines came before BEGIN.
	top bool
}

// line takes line i (from 0), or the start of a long one.
func (m *markers) line(i int, l string) error {
	switch t := strings.TrimSpace(l); {
	case t == BeginMarker:
		if m.begin >= 0 {
			return &MarkerError{"a second BEGIN line", i + 1}
		}
		if m.end >= 0 {
			return &MarkerError{"a BEGIN line after the END line", i + 1}
		}
		m.begin = i
	case t == EndMarker:
		if m.begin < 0 {
			return &MarkerError{"an END line with no BEGIN line before it", i + 1}
		}
		if m.end >= 0 {
			return &MarkerError{"a second END line", i + 1}
		}
		m.end = i
	case m.begin < 0 && t != "" && !strings.HasPrefix(t, "#"):
		m.top = false
	}
	return nil
}

// done is the check at the end of the file.
func (m *markers) done() error {
	if m.begin >= 0 && m.end < 0 {
		return &MarkerError{"a BEGIN line with no END line after it", m.begin + 1}
	}
	return nil
}

// Span is where Scan found the block: lines counted from 1.
type Span struct {
	// First and Last are the block's first and last line: its markers,
	// and Last the empty line after END (which With writes) when there
	// is one. Both are 0 when the file has no block.
	First, Last int
	// Created says the block has CreatedMarker.
	Created bool
}

// Has reports whether Scan found the block.
func (s Span) Has() bool { return s.First > 0 }

// scanBuffer is the longest line Scan and Remove hold; a longer one is
// passed through in pieces, and is no marker.
const scanBuffer = 64 << 10

// Scan finds the block in an ssh_config file read from r to its end, as
// Parse would, holding no more than one line of it at a time: for a file
// too large to hold, whose block --remove must still take out. Broken
// markers are a *MarkerError.
func Scan(r io.Reader) (Span, error) {
	m := markers{begin: -1, end: -1, top: true}
	var s Span
	n := 0
	err := eachLine(r, func(piece []byte, first bool) error {
		if !first {
			return nil
		}
		n++
		l := string(piece)
		if s.Has() && s.Last == 0 {
			if t := strings.TrimSpace(l); t == CreatedMarker {
				s.Created = true
			}
		}
		if m.end >= 0 && s.Last == m.end+1 && n == m.end+2 && (l == "\n" || l == "\r\n") {
			s.Last = n
		}
		if err := m.line(n-1, l); err != nil {
			return err
		}
		if m.begin == n-1 {
			s.First = n
		}
		if m.end == n-1 {
			s.Last = n
		}
		return nil
	})
	if err != nil {
		return Span{}, err
	}
	return s, m.done()
}

// Remove copies the file read from r to w without s's lines: what
// Without is, streamed.
func (s Span) Remove(w io.Writer, r io.Reader) error {
	bw := bufio.NewWriterSize(w, scanBuffer)
	n := 0
	err := eachLine(r, func(piece []byte, first bool) error {
		if first {
			n++
		}
		if s.Has() && s.First <= n && n <= s.Last {
			return nil
		}
		_, err := bw.Write(piece)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// DiffRemove writes to w the unified diff of Remove's change to the file
// read from r, labelled with name as Diff labels it: one hunk without
// context, the block's lines taken out. It writes nothing when s has no
// block.
func (s Span) DiffRemove(w io.Writer, name string, r io.Reader) error {
	if !s.Has() {
		return nil
	}
	if _, err := fmt.Fprintf(w, "--- %s\n+++ %s (new)\n@@ -%s +%s @@\n", name, name, hunkRange(s.First-1, s.Last), hunkRange(s.First-1, s.First-1)); err != nil {
		return err
	}
	n := 0
	var last []byte
	err := eachLine(r, func(piece []byte, first bool) error {
		if first {
			n++
		}
		if n < s.First || n > s.Last {
			return nil
		}
		if first {
			if _, err := io.WriteString(w, "-"); err != nil {
				return err
			}
		}
		last = piece
		_, err := w.Write(piece)
		return err
	})
	if err == nil && !bytes.HasSuffix(last, []byte("\n")) {
		_, err = io.WriteString(w, "\n\\ No newline at end of file\n")
	}
	return err
}

// eachLine calls f with each line read from r, "\n" included, in pieces
// of at most scanBuffer bytes: first says a piece starts a line.
func eachLine(r io.Reader, f func(piece []byte, first bool) error) error {
	br := bufio.NewReaderSize(r, scanBuffer)
	first := true
	for {
		piece, err := br.ReadSlice('\n')
		if len(piece) > 0 {
			if ferr := f(piece, first); ferr != nil {
				return ferr
			}
		}
		switch {
		case err == nil:
			first = true
		case errors.Is(err, bufio.ErrBufferFull):
			first = false
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// Has reports whether the file has the block.
func (f *File) Has() bool { return f.has }

// Created reports whether the file's block has CreatedMarker: ssh-config
// created the file.
func (f *File) Created() bool {
	for l := range strings.Lines(f.block) {
		if strings.TrimSpace(l) == CreatedMarker {
			return true
		}
	}
	return false
}

// With is the file's text with block at its top: OpenSSH takes the first
// value it reads for most options, so the block must come before any
// global option or Include of the user's (the block ends in "Host *",
// which makes what follows global again). A new block is followed by one
// empty line (with the file's line ending) when the file is not empty. A
// block already at the top (after nothing but comments and empty lines)
// is rewritten in place; one further down, where an older cocoonbox
// wrote it before the first Host line, is moved to the top.
func (f *File) With(block string) string {
	block = strings.ReplaceAll(block, "\n", f.eol)
	if f.has && f.top {
		return f.before + block + f.after
	}
	rest := f.Without()
	if rest == "" {
		return block
	}
	return block + f.eol + rest
}

// Without is the file's text with the block, and the empty line With put
// after it, taken out: byte for byte the file before With.
func (f *File) Without() string {
	if !f.has {
		return f.after
	}
	after := f.after
	if rest, ok := strings.CutPrefix(after, f.eol); ok {
		after = rest
	} else if rest, ok := strings.CutPrefix(after, "\n"); ok {
		after = rest
	}
	return f.before + after
}

// Diff is a unified diff (diff -u) from old to new, labelled with name:
// the one hunk where they differ, with three lines of context, or "" when
// they are equal. The block is the only place a rewrite changes, so one
// hunk says it all.
func Diff(name, old, new string) string {
	if old == new {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	const ctx = 3
	start := max(pre-ctx, 0)
	aEnd, bEnd := min(len(a)-suf+ctx, len(a)), min(len(b)-suf+ctx, len(b))
	var s strings.Builder
	fmt.Fprintf(&s, "--- %s\n+++ %s (new)\n", name, name)
	fmt.Fprintf(&s, "@@ -%s +%s @@\n", hunkRange(start, aEnd), hunkRange(start, bEnd))
	for _, l := range a[start:pre] {
		s.WriteString(" " + l)
	}
	for _, l := range a[pre : len(a)-suf] {
		s.WriteString("-" + l)
	}
	for _, l := range b[pre : len(b)-suf] {
		s.WriteString("+" + l)
	}
	for _, l := range a[len(a)-suf : aEnd] {
		s.WriteString(" " + l)
	}
	return s.String()
}

// splitLines splits text into lines that each end in "\n"; a last line
// without one gets diff's marker.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	ls := strings.SplitAfter(text, "\n")
	if ls[len(ls)-1] == "" {
		return ls[:len(ls)-1]
	}
	ls[len(ls)-1] += "\n\\ No newline at end of file\n"
	return ls
}

// hunkRange is diff -u's "start,count" for lines [from, to), 1-based.
func hunkRange(from, to int) string {
	n := to - from
	if n == 0 {
		return fmt.Sprintf("%d,0", from)
	}
	if n == 1 {
		return fmt.Sprintf("%d", from+1)
	}
	return fmt.Sprintf("%d,%d", from+1, n)
}

// Written is what the file's block says of the options Block was given:
// the suffix of its Host line and the cocoonbox-ssh path of its
// ProxyCommand (quoted for goos, as Options.GOOS), read back so that a
// rewrite can keep them. ok is false
// when the file has no block, or one Block did not write.
func (f *File) Written(goos string) (suffix, sshPath string, ok bool) {
	if !f.has {
		return "", "", false
	}
	for l := range strings.Lines(f.block) {
		t := strings.TrimSpace(l)
		if s, found := strings.CutPrefix(t, "Host *"); found && suffix == "" && s != "" {
			suffix = s
		}
		if v, found := strings.CutPrefix(t, "ProxyCommand "); found && sshPath == "" {
			w, rest, good := firstWord(goos, v)
			if !good || !strings.HasPrefix(rest, " --stdio") {
				return "", "", false
			}
			sshPath = strings.ReplaceAll(w, "%%", "%")
		}
	}
	return suffix, sshPath, suffix != "" && sshPath != ""
}

// firstWord splits a ProxyCommand at its first unquoted blank as Block
// quotes it for goos: the word unquoted, and the rest. For Unix it reads
// a POSIX shell's quotes; for Windows, double quotes around a word whose
// backslashes are its own.
func firstWord(goos, s string) (word, rest string, ok bool) {
	var w strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			return w.String(), s[i:], true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 || goos != "windows" && strings.ContainsAny(s[i+1:i+1+j], "$`\\") {
				return "", "", false
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '\'' && goos != "windows":
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", "", false
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '\\' && goos != "windows":
			if i+1 < len(s) {
				i++
			}
			w.WriteByte(s[i])
		default:
			w.WriteByte(c)
		}
	}
	return w.String(), "", true
}
