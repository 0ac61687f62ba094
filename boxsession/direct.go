package boxsession

import (
	"os"
	"path/filepath"
	"strings"
)

// directCommand returns the program and the arguments that shell would
// run for line when running them itself is the same as `shell -c line`,
// so that the holder starts the command without a shell of its own (the
// box's shell already ran once for the Exec): the shell is sh, dash or
// bash with nothing that `-c` would read (BASH_ENV, exported functions),
// the line one simple command of bare or single-quoted words, its first a
// program found in the absolute directories of env's PATH (or a path)
// that is no shell builtin or keyword. It returns "" otherwise: the line
// then goes to the shell.
func directCommand(shell, line, dir string, env []string) (string, []string) {
	switch filepath.Base(shell) {
	case "sh", "dash", "bash":
	default:
		return "", nil
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "BASH_ENV=") || strings.HasPrefix(kv, "ENV=") || strings.HasPrefix(kv, "BASH_FUNC_") {
			return "", nil
		}
	}
	args := simpleWords(line)
	if len(args) == 0 || strings.Contains(args[0], "=") {
		return "", nil
	}
	if strings.Contains(shellWords, " "+args[0]+" ") && !(len(args) == 1 && (args[0] == "true" || args[0] == "false")) {
		// true and false alone do as their programs do; every other
		// builtin may differ from its program (echo, kill, pwd, ...).
		return "", nil
	}
	name := args[0]
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			if !filepath.IsAbs(dir) {
				return "", nil
			}
			name = filepath.Join(dir, name)
		}
		if !executable(name) {
			return "", nil
		}
		return name, args
	}
	for _, d := range filepath.SplitList(envOf(env, "PATH")) {
		if !filepath.IsAbs(d) {
			// An empty or relative entry is the shell's working
			// directory: left to the shell.
			return "", nil
		}
		if p := filepath.Join(d, name); executable(p) {
			return p, args
		}
	}
	// Not found: the shell says so, in its words and with its 127.
	return "", nil
}

// executable reports whether p is a regular file with an execute bit.
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// simpleWords splits line into words when it is nothing but words of
// ASCII letters, digits, -_./=:@,+% and single-quoted parts, apart by
// spaces or tabs: a line the shell would expand to exactly these words.
// It returns nil for anything else.
func simpleWords(line string) []string {
	var words []string
	var w strings.Builder
	in := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./=:@,+%", c) >= 0:
			w.WriteByte(c)
			in = true
		default:
			return nil
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// shellWords are the builtins and reserved words of bash and dash, each
// between spaces.
const shellWords = " . : [ alias bg bind break builtin caller cd command compgen complete " +
	"compopt continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash " +
	"help history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly " +
	"return set shift shopt source suspend test times trap true type typeset ulimit umask unalias " +
	"unset wait if then else elif fi case esac for select while until do done in function time " +
	"coproc chdir "
