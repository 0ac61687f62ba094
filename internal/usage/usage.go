// Package usage keeps the help of a command that has no cobra tree (the
// ssh drop-in, git's remote helper) in one place, and renders it both as
// its --help text and as its man page, so the two cannot drift apart. Its
// Wrap fills the text of other messages too.
package usage

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Page is one command's help.
type Page struct {
	// Name is the program's name, such as "cocoonbox-ssh".
	Name string
	// Short is the one line of the man page's NAME section.
	Short string
	// Synopsis is the usage lines, with no "usage: " prefix; later lines
	// are indented by the caller's choice.
	Synopsis []string
	// Description is paragraphs of plain text.
	Description []string
	// Exit describes the exit status.
	Exit string
	// Environment is NAME, meaning pairs.
	Environment [][2]string
	// SeeAlso is man page references such as "ssh(1)".
	SeeAlso []string
}

// Usage is the synopsis as the command prints it: "usage: " and the lines.
func (p Page) Usage() string {
	var b strings.Builder
	for i, l := range p.Synopsis {
		if i == 0 {
			fmt.Fprintf(&b, "usage: %s\n", l)
		} else {
			fmt.Fprintf(&b, "           %s\n", l)
		}
	}
	return b.String()
}

// Help is the whole --help text: usage, description, exit status,
// environment, and where the manual is.
func (p Page) Help() string {
	var b strings.Builder
	b.WriteString(p.Usage())
	for _, d := range p.Description {
		b.WriteString("\n" + Wrap(d, 76) + "\n")
	}
	if p.Exit != "" {
		b.WriteString("\n" + Wrap("Exit status: "+p.Exit, 76) + "\n")
	}
	if len(p.Environment) > 0 {
		b.WriteString("\nEnvironment:\n")
		for _, e := range p.Environment {
			fmt.Fprintf(&b, "  %-20s %s\n", e[0], e[1])
		}
	}
	fmt.Fprintf(&b, "\nThe manual: man %s\n", p.Name)
	return b.String()
}

// Roff is the man page, section 1, dated date (kept fixed by the caller
// so that the page only changes with its text).
func (p Page) Roff(date time.Time, source string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %q \"1\" %q %q \"cocoonbox manual\"\n", strings.ToUpper(p.Name), date.Format("Jan 2006"), source)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", esc(p.Name), esc(p.Short))
	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, l := range p.Synopsis {
		b.WriteString(esc(l) + "\n")
	}
	b.WriteString(".fi\n.SH DESCRIPTION\n")
	for i, d := range p.Description {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		b.WriteString(esc(d) + "\n")
	}
	if p.Exit != "" {
		fmt.Fprintf(&b, ".SH EXIT STATUS\n%s\n", esc(p.Exit))
	}
	if len(p.Environment) > 0 {
		b.WriteString(".SH ENVIRONMENT\n")
		for _, e := range p.Environment {
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", esc(e[0]), esc(e[1]))
		}
	}
	if len(p.SeeAlso) > 0 {
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", esc(strings.Join(p.SeeAlso, ", ")))
	}
	return []byte(b.String())
}

// esc makes text safe as roff text: a backslash is \e, and a line may
// not start with a control character (. or ').
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// Wrap fills s to lines of at most width runes, breaking at spaces; a
// word longer than width (a path) has a line of its own.
func Wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		l := utf8.RuneCountInString(w)
		if n > 0 && n+1+l > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += l
	}
	return b.String()
}
