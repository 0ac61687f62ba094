package agentwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxAPIKey is the longest API key sign-in takes, in bytes; vendors' keys
// are about 100 to 200.
const MaxAPIKey = 4 << 10

// ErrNoAPIKey is an empty first line, or none.
var ErrNoAPIKey = errors.New("no API key on stdin")

// ReadAPIKey reads an API key as `codex login --with-api-key` and `gh auth
// login --with-token` take one: the first line of r, blanks around it
// trimmed. It fails with ErrNoAPIKey for an empty line, and for a key
// longer than MaxAPIKey or holding a space or a control character (two
// words, a pasted line break, a terminal escape), so that what reaches
// the box is the one key or nothing. It reads no further than the line's
// end, except what one buffered read brings.
func ReadAPIKey(r io.Reader) (string, error) {
	br := bufio.NewReader(io.LimitReader(r, MaxAPIKey+64))
	line, err := br.ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	if err == io.EOF && len(line) >= MaxAPIKey+64 {
		return "", fmt.Errorf("the API key is longer than %d bytes", MaxAPIKey)
	}
	return CheckAPIKey(line)
}

// CheckAPIKey is key with the blanks around it trimmed, or ReadAPIKey's
// error for it.
func CheckAPIKey(key string) (string, error) {
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return "", ErrNoAPIKey
	case len(key) > MaxAPIKey:
		return "", fmt.Errorf("the API key is longer than %d bytes", MaxAPIKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f {
			return "", errors.New("the API key holds a space, a control character or a non-ASCII byte")
		}
	}
	return key, nil
}
