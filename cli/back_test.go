package cli

import (
	"bytes"
	"testing"

	"github.com/cocoonbox/cocoonbox/offload"
)

// The box's text reaches the terminal without its escape sequences.
func TestPrintBackSanitizes(t *testing.T) {
	var out, errb bytes.Buffer
	printBack(Streams{Out: &out, Err: &errb}, &offload.BackResult{
		Record: &offload.Record{BoxName: "main"},
		Body:   "# Hand-over: done \x1b]0;pwned\x07\n\x1b]52;c;ZXZpbA==\x07\x1b[2J## Goal\n\tnone\n",
		Merge:  &offload.MergeResult{Outcome: offload.Branched, Branch: "cocoonbox/back-20261103T140509Z", Reason: "the box changed \x1b[31mred\x1b[0m.txt, which you changed too"},
	})
	if want := "# Hand-over: done ?]0;pwned?\n?]52;c;ZXZpbA==??[2J## Goal\n\tnone\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if bytes.ContainsRune(errb.Bytes(), 0x1b) {
		t.Errorf("stderr has an escape: %q", errb.String())
	}
}
