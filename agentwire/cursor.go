package agentwire

// cursor is the Cursor CLI: begin checks it in the box, and every verb
// then refuses it, as its session is not built here yet.
type cursor struct {
	facts
	noSession
}

var cursorKind = cursor{facts: facts{
	name: "cursor", title: "Cursor CLI", binary: "cursor-agent",
	install: Install{Command: "curl -fsS https://cursor.com/install | bash", ScriptURL: "https://cursor.com/install"},
	login:   "cursor-agent login",
	hosts:   []string{"cursor.com", "cursor.sh"},
	status:  "cursor-agent status", exit: "/exit",
	unsupported: "Cursor CLI sessions are not built into the box agent yet",
}}
