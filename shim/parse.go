// Package shim gives the cocoonbox API the command line of OpenSSH's ssh(1):
// its option grammar, its host words and its exec semantics, so that git,
// rsync, scp and every ssh-expecting tool can run cocoonbox-ssh in its place.
package shim

import (
	"fmt"
	"strings"
)

// TTYMode is what -T, -t and -tt asked for (ssh(1) -T, -t).
type TTYMode int

// The terminal modes.
const (
	TTYAuto   TTYMode = iota // neither: a terminal only for a login shell on a terminal
	TTYNever                 // -T
	TTYWanted                // -t: a terminal when stdin is one
	TTYForced                // -tt: a terminal even when stdin is not one
)

// Options is a parsed ssh command line.
type Options struct {
	// Box is the box name from the host word.
	Box string
	// User is the user from user@host or -l; the box user is fixed, so it is
	// only reported by -G.
	User string
	// Port is from -p or ssh://host:port; reported by -G only.
	Port string
	// Command is the command words, joined with single spaces before they
	// run, as ssh does.
	Command []string
	TTY     TTYMode
	// NoStdin is -n: stdin is /dev/null.
	NoStdin bool
	// Quiet is -q; Verbose counts -v.
	Quiet   bool
	Verbose int
	// Config holds -o options by lower-case key, each value as given, in
	// order.
	Config map[string][]string
}

// UsageError is a command line ssh would refuse; ssh exits 255 for it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// optionsWithArg are the ssh(1) option letters that take an argument, as in
// OpenSSH's getopt string.
const optionsWithArg = "BbcDEeFIiJLlmOoPpQRSWw"

// optionsNoArg are the ssh(1) option letters that take none.
const optionsNoArg = "46AaCfGgKkMNnqsTtVvXxYy"

// Parse parses ssh's command line, args without the program name.
func Parse(args []string) (*Options, error) {
	o := &Options{Config: map[string][]string{}}
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		i++
		for j := 1; j < len(a); j++ {
			c := a[j]
			switch {
			case strings.IndexByte(optionsWithArg, c) >= 0:
				val := a[j+1:]
				if val == "" {
					if i >= len(args) {
						return nil, &UsageError{fmt.Sprintf("option requires an argument -- %c", c)}
					}
					val = args[i]
					i++
				}
				if err := o.setArg(c, val); err != nil {
					return nil, err
				}
				j = len(a)
			case strings.IndexByte(optionsNoArg, c) >= 0:
				o.setFlag(c)
			default:
				return nil, &UsageError{fmt.Sprintf("unknown option -- %c", c)}
			}
		}
	}
	if i >= len(args) {
		return nil, &UsageError{"no box named: usage: cocoonbox-ssh [options] BOX [command ...]"}
	}
	if err := o.setHost(args[i]); err != nil {
		return nil, err
	}
	o.Command = args[i+1:]
	return o, nil
}

func (o *Options) setFlag(c byte) {
	switch c {
	case 'T':
		o.TTY = TTYNever
	case 't':
		if o.TTY == TTYWanted {
			o.TTY = TTYForced
		} else if o.TTY != TTYForced {
			o.TTY = TTYWanted
		}
	case 'n':
		o.NoStdin = true
	case 'q':
		o.Quiet = true
	case 'v':
		o.Verbose++
	}
}

func (o *Options) setArg(c byte, v string) error {
	switch c {
	case 'o':
		k, val, ok := splitOption(v)
		if !ok {
			return &UsageError{fmt.Sprintf("bad -o option %q: want Key=Value", v)}
		}
		o.Config[k] = append(o.Config[k], val)
	case 'l':
		o.User = v
	case 'p':
		o.Port = v
	}
	return nil
}

// splitOption splits "Key=Value", "Key Value" or "Key = Value" as ssh_config
// lines are split, and lower-cases the key.
func splitOption(s string) (key, val string, ok bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, "= \t")
	if i <= 0 {
		return "", "", false
	}
	key = strings.ToLower(s[:i])
	rest := strings.TrimLeft(s[i:], " \t")
	rest = strings.TrimPrefix(rest, "=")
	return key, strings.TrimLeft(rest, " \t"), true
}

// setHost takes [user@]BOX, BOX.cocoonbox or ssh://[user@]BOX[:port].
func (o *Options) setHost(h string) error {
	if rest, ok := strings.CutPrefix(h, "ssh://"); ok {
		h = strings.TrimSuffix(rest, "/")
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			o.Port = h[i+1:]
			h = h[:i]
		}
	}
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		o.User = h[:i]
		h = h[i+1:]
	}
	h = strings.TrimSuffix(h, ".cocoonbox")
	if h == "" || strings.ContainsAny(h, "/ \t\n:") {
		return &UsageError{fmt.Sprintf("bad box name %q: want [user@]BOX", h)}
	}
	o.Box = h
	return nil
}

// Line is the remote command: the words joined with single spaces, which
// the box user's shell then parses, as ssh(1) does.
func (o *Options) Line() string { return strings.Join(o.Command, " ") }
