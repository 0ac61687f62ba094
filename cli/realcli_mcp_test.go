package cli_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/internal/modeltest"
)

// controlContract is each control MCP tool's structuredContent as
// seeds/001 "Control MCP" states it: field name to JSON type ("string",
// "integer", "boolean", "strings", "state": a string of the contract's
// states), as docs/protocol.md spells out Boxes.Usage for usage, with the
// member docs/protocol.md adds as ours. box_list's boxes are checked
// against boxEntry. Written from the contract, not from
// our own outputSchema, so that a drift of either shows.
var controlContract = map[string]map[string]string{
	"box_list":      {"boxes": "boxes"},
	"box_status":    {"box_id": "string", "name": "string", "state": "state", "image": "string", "latest_image": "string", "upgrade_available": "boolean", "last_saved_at_ms": "integer"},
	"box_ensure":    {"box_id": "string", "state": "state", "operation_id": "string"},
	"box_create":    {"box_id": "string", "name": "string", "state": "state", "operation_id": "string"},
	"box_hibernate": {"box_id": "string", "state": "state", "operation_id": "string"},
	"box_save":      {"box_id": "string", "last_saved_at_ms": "integer", "operation_id": "string", "bytes": "integer"},
	"box_upgrade":   {"box_id": "string", "state": "state", "image": "string", "operation_id": "string"},
	"box_delete":    {"box_id": "string", "operation_id": "string"},
	// unmeasured is ours (docs/protocol.md): the fields a server cannot
	// measure.
	"usage": {"today": "integer", "month": "integer", "daily_cap_micros": "integer", "default_cap": "boolean", "remaining_today_micros": "integer", "unmeasured": "strings"},
}

// boxEntry is one of box_list's boxes.
var boxEntry = map[string]string{"box_id": "string", "name": "string", "state": "state", "image": "string", "last_saved_at_ms": "integer"}

// contractStates are the contract's box states.
var contractStates = []string{"absent", "starting", "running", "hibernating", "hibernated", "failed"}

// checkFields says what is wrong with obj against fields: a missing or
// extra member, or a member of another type; "" when nothing is.
func checkFields(obj map[string]any, fields map[string]string) string {
	var bad []string
	for k, typ := range fields {
		v, ok := obj[k]
		if !ok {
			bad = append(bad, "no "+k)
			continue
		}
		switch typ {
		case "string":
			_, ok = v.(string)
		case "state":
			s, _ := v.(string)
			ok = slices.Contains(contractStates, s)
		case "boolean":
			_, ok = v.(bool)
		case "strings":
			l, isList := v.([]any)
			ok = isList
			for _, e := range l {
				_, isStr := e.(string)
				ok = ok && isStr
			}
		case "integer":
			f, isNum := v.(float64)
			ok = isNum && f == float64(int64(f))
		case "boxes":
			bs, isList := v.([]any)
			ok = isList
			for _, b := range bs {
				m, isObj := b.(map[string]any)
				if !isObj {
					ok = false
				} else if why := checkFields(m, boxEntry); why != "" {
					bad = append(bad, "a box: "+why)
				}
			}
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("%s %v is not %s", k, v, typ))
		}
	}
	for k := range obj {
		if _, ok := fields[k]; !ok {
			bad = append(bad, "extra "+k)
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// resultText is the tool result's text as the tool gave it: codex 0.171
// puts "Wall time: S seconds\nOutput:\n" before an MCP tool's output
// (recorded in testdata/realcli/README).
func resultText(s string) string {
	if strings.HasPrefix(s, "Wall time:") {
		if _, after, ok := strings.Cut(s, "Output:"); ok {
			s = after
		}
	}
	return strings.TrimSpace(s)
}

// modeltools: stdout becomes one line per call of a tool the scripted
// model made that is not the CLI's shell (a "model: tool" step), in
// order: the tool's name (after its server's prefix), "ok" or "error", and
// the result the CLI sent back to the model, on one line (a newline as
// \n). An error is a result the CLI marked one (claude's is_error), or a
// control MCP tool's result that is no JSON object. It fails when a call
// got no result back; when a control MCP tool's object is not its
// structuredContent of the contract (every member, none other, each of
// its type); when a result the CLI marked an error is an object; and
// when a control MCP tool's error is not one line.
func cmdModelTools(ts *testscript.TestScript, neg bool, args []string, models map[string]*modeltest.Server) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: modeltools")
	}
	m := models[ts.Getenv("WORK")]
	var answered = map[string]bool{}
	for _, r := range m.Requests() {
		if n, ok := strings.CutPrefix(r.Answer, "call:"); ok {
			answered[n] = true
		}
	}
	var b strings.Builder
	for _, c := range m.ToolCalls() {
		if !answered[c.Name] {
			continue // the CLI's own tools (Bash, exec_command)
		}
		name := c.Name
		if i := strings.LastIndex(name, "__"); i >= 0 {
			name = name[i+2:]
		}
		if !c.Answered {
			ts.Fatalf("%s %s: no result came back to the model", name, c.Input)
		}
		text := resultText(c.Result)
		var obj map[string]any
		isObj := json.Unmarshal([]byte(text), &obj) == nil && obj != nil
		fields, contract := controlContract[name]
		switch {
		case isObj && c.IsError:
			ts.Fatalf("%s %s: the CLI marked a result an error that is an object: %s", name, c.Input, text)
		case isObj && contract:
			if why := checkFields(obj, fields); why != "" {
				ts.Fatalf("%s %s: its result is not the contract's: %s: %s", name, c.Input, why, text)
			}
			compact, _ := json.Marshal(obj)
			fmt.Fprintf(&b, "%s ok %s\n", name, compact)
		case contract || c.IsError:
			// A contract tool's success is always an object; codex sends
			// no mark of an error to the model.
			if contract && strings.Contains(text, "\n") {
				ts.Fatalf("%s %s: an error of more than one line: %q", name, c.Input, text)
			}
			fmt.Fprintf(&b, "%s error %s\n", name, strings.ReplaceAll(text, "\n", `\n`))
		default:
			fmt.Fprintf(&b, "%s ok %s\n", name, strings.ReplaceAll(text, "\n", `\n`))
		}
	}
	fmt.Fprint(ts.Stdout(), b.String())
}
