package agentwire

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// docExamples is the JSON lines shown in docs/cocoonbox-agent.md: each
// indented block that opens with {"ok", joined, with the doc's ",..."
// elisions dropped.
func docExamples(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/cocoonbox-agent.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, `    {"ok"`):
			if cur.Len() > 0 {
				out = append(out, cur.String())
			}
			cur.Reset()
			cur.WriteString(strings.TrimSpace(l))
		case cur.Len() > 0 && strings.HasPrefix(l, "     "):
			cur.WriteString(strings.TrimSpace(l))
		default:
			if cur.Len() > 0 {
				out = append(out, cur.String())
			}
			cur.Reset()
		}
	}
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], ",...", "")
	}
	return out
}

// TestDocExamples decodes each verb's documented answer into its type,
// refusing fields the type lacks, and checks that the example shows every
// field the type always writes: the doc and the wire say the same.
func TestDocExamples(t *testing.T) {
	examples := docExamples(t)
	for _, c := range []struct {
		name, marker string
		v            any
	}{
		{"begin", `"dir":"/workspace/N"`, &BeginResult{}},
		{"begin refused", `"error":"box_cli: claude is not installed`, &Failure{}},
		{"send", `"timings_ms"`, &SendResult{}},
		{"send --message", `"delivery":"pasted|queued"`, &MessageResult{}},
		{"read", `"entries"`, &ReadResult{}},
		{"status", `"sessions"`, &StatusResult{}},
		{"sign-in", `"key_file"`, &SignInResult{}},
	} {
		var ex string
		for _, e := range examples {
			if strings.Contains(e, c.marker) {
				ex = e
				break
			}
		}
		if ex == "" {
			t.Errorf("%s: no example in docs/cocoonbox-agent.md holds %s", c.name, c.marker)
			continue
		}
		d := json.NewDecoder(strings.NewReader(ex))
		d.DisallowUnknownFields()
		if err := d.Decode(c.v); err != nil {
			t.Errorf("%s: the documented %s does not decode: %v", c.name, ex, err)
			continue
		}
		missing(t, c.name, ex, reflect.TypeOf(c.v).Elem())
	}
}

// missing reports the fields of struct type ty (and of the structs it
// holds, unless the example shows an empty list of them) without
// omitempty that the example ex does not name.
func missing(t *testing.T, name, ex string, ty reflect.Type) {
	t.Helper()
	for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
		ty = ty.Elem()
	}
	if ty.Kind() != reflect.Struct {
		return
	}
	for f := range ty.Fields() {
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		if !strings.Contains(opts, "omitempty") && !strings.Contains(ex, `"`+tag+`":`) {
			t.Errorf("%s: the documented answer lacks %q (%s.%s)", name, tag, ty.Name(), f.Name)
		}
		if !strings.Contains(ex, `"`+tag+`":[]`) {
			missing(t, name, ex, f.Type)
		}
	}
}

// TestFailureLine is the failure line the box half writes as the laptop
// half reads it: ok false, and no empty findings or cli.
func TestFailureLine(t *testing.T) {
	b, err := json.Marshal(Failure{Code: CodeRefused, Error: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte(`{"ok":false,"code":"refused","error":"x"}`); !bytes.Equal(b, want) {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestBlockedBy(t *testing.T) {
	var none *CLIInfo
	s := "/etc/claude-code/managed-settings.json"
	for _, c := range []struct {
		in   *CLIInfo
		want string
	}{{none, ""}, {&CLIInfo{}, ""}, {&CLIInfo{HooksBlocked: &s}, s}} {
		if got := c.in.BlockedBy(); got != c.want {
			t.Errorf("BlockedBy() = %q, want %q", got, c.want)
		}
	}
}
