// Package shellquote makes words for a POSIX shell (sh, bash, dash, zsh):
// the one single-quoting of the command lines both halves of cocoonbox
// write for a box's shell, ssh's ProxyCommand and git's.
package shellquote

import "strings"

// WordBytes are the bytes besides ASCII letters and digits that Word
// leaves bare: none of them is special to a POSIX shell in any place of a
// word.
const WordBytes = "-_./=:@,+"

// Quote returns s as one single-quoted word, where each ' of s closes
// the quotes, stands escaped by a backslash, and opens them again. Any
// string, the empty one included, comes back from the shell byte for byte.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Git returns s single-quoted as git's sq_quote_buf (quote.c) does: '
// and ! outside the quotes, each behind a backslash, so that a csh-like
// shell's history expansion does not read the !.
func Git(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, c := range []byte(s) {
		if c == '\'' || c == '!' {
			b.WriteString(`'\`)
			b.WriteByte(c)
			b.WriteByte('\'')
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('\'')
	return b.String()
}

// Bare reports whether s is non-empty and every byte of it is an ASCII
// letter, digit or one of bare, so that it may stand as a word unquoted.
func Bare(s, bare string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(bare, c) >= 0) {
			return false
		}
	}
	return true
}

// Word returns s unchanged when Bare(s, WordBytes), else Quote(s): the
// shortest word most readers of a logged command line expect.
func Word(s string) string { return WordWith(s, WordBytes) }

// WordWith returns s unchanged when Bare(s, bare), else Quote(s), for a
// caller whose output is pinned to another set of bare bytes.
func WordWith(s, bare string) string {
	if Bare(s, bare) {
		return s
	}
	return Quote(s)
}
