package agentwire

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Program is the box half's command (contract "Agent binary"); its
// offload verbs are `Program offload <verb> [flags]`.
const Program = "cocoonbox-agent"

// Verb is one verb of `cocoonbox-agent offload`. Its flags are the fields
// of Req, a struct whose fields carry a `flag:"NAME"` tag (with
// `,always` for a flag written even at its default), a `help:"…"` tag and
// optionally a `default:"…"` one; a field is a string, a bool or an int.
// The laptop half writes a request as argv with Argv, and the box half
// parses the same flags into a Req with Bind, so a change to a verb's
// flags is one change here.
type Verb[Req any] struct {
	// Name is the verb's word: begin, send, read, ….
	Name string
	// Use is the verb's synopsis for help, Short its one-line summary.
	Use, Short string
	// MaxArgs is how many positional arguments the verb takes after its
	// flags: event's payload, else 0.
	MaxArgs int
	// Results are zero values of the JSON lines the verb answers with
	// when it succeeds, one per mode (send answers a SendResult for a
	// stream, a MessageResult for --message or --back); a failure is a
	// Failure.
	Results []any
}

// Flag is one flag of a verb, as its request type declares it.
type Flag struct {
	// Name is the flag without its dashes.
	Name string
	// Type is the Go kind of its field: reflect.String, Bool or Int.
	Type reflect.Kind
	// Default is its value when not given, as text ("" for a string,
	// "false", "0").
	Default string
	// Help is its help line.
	Help string
	// Always says Argv writes it even when its value is the default.
	Always bool
	index  int
}

// FlagSet is where Bind declares a verb's flags: *pflag.FlagSet (a cobra
// command's Flags()) is one.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
	IntVar(p *int, name string, value int, usage string)
}

// Info is what a verb tells of itself whatever its request type, for
// lists of verbs and their tests.
type Info struct {
	Name, Use, Short string
	MaxArgs          int
	Flags            []Flag
	// Request is the request's struct type; Results the answers'.
	Request reflect.Type
	Results []reflect.Type
}

// Flags are the verb's flags in the order of Req's fields, which is the
// order Argv writes them and help lists them.
func (v Verb[Req]) Flags() []Flag {
	t := reflect.TypeFor[Req]()
	var out []Flag
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("flag"), ",")
		if name == "" {
			continue
		}
		fl := Flag{Name: name, Type: f.Type.Kind(), Default: f.Tag.Get("default"), Help: f.Tag.Get("help"), Always: opts == "always", index: i}
		if fl.Default == "" {
			fl.Default = fmt.Sprint(reflect.Zero(f.Type).Interface())
		}
		out = append(out, fl)
	}
	return out
}

// Info describes the verb.
func (v Verb[Req]) Info() Info {
	in := Info{Name: v.Name, Use: v.Use, Short: v.Short, MaxArgs: v.MaxArgs, Flags: v.Flags(), Request: reflect.TypeFor[Req]()}
	for _, r := range v.Results {
		in.Results = append(in.Results, reflect.TypeOf(r))
	}
	return in
}

// Argv is the command line of req after the program's name: "offload",
// the verb, then each flag whose value is not its default (or that is
// Always written) as `--name value`, or `--name` for a true bool
// (`--name=false` for a false one).
func (v Verb[Req]) Argv(req Req) []string {
	args := []string{"offload", v.Name}
	rv := reflect.ValueOf(req)
	for _, f := range v.Flags() {
		fv := rv.Field(f.index)
		var val string
		switch f.Type {
		case reflect.Bool:
			if b := strconv.FormatBool(fv.Bool()); b != f.Default || f.Always {
				if fv.Bool() {
					args = append(args, "--"+f.Name)
				} else {
					args = append(args, "--"+f.Name+"=false")
				}
			}
			continue
		case reflect.Int:
			val = strconv.FormatInt(fv.Int(), 10)
		default:
			val = fv.String()
		}
		if val != f.Default || f.Always {
			args = append(args, "--"+f.Name, val)
		}
	}
	return args
}

// Bind declares the verb's flags in fs, each set into its field of req;
// the fields start at their defaults.
func (v Verb[Req]) Bind(fs FlagSet, req *Req) {
	rv := reflect.ValueOf(req).Elem()
	for _, f := range v.Flags() {
		p := rv.Field(f.index).Addr().Interface()
		switch f.Type {
		case reflect.Bool:
			fs.BoolVar(p.(*bool), f.Name, f.Default == "true", f.Help)
		case reflect.Int:
			n, _ := strconv.Atoi(f.Default)
			fs.IntVar(p.(*int), f.Name, n, f.Help)
		default:
			fs.StringVar(p.(*string), f.Name, f.Default, f.Help)
		}
	}
}

// The request types of the verbs: each field is a flag (Verb).

// BeginRequest is begin's flags.
type BeginRequest struct {
	Repo   string `flag:"repo" help:"the repo key"`
	Name   string `flag:"name" help:"the copy's directory name in the workspace"`
	Kind   string `flag:"kind" help:"the box CLI: claude, codex or cursor"`
	ID     string `flag:"id" help:"the offload id"`
	NoRepo bool   `flag:"no-repo" help:"no repository travels"`
}

// SendRequest is send's flags. With neither Message nor Back, stdin is
// the send stream and Kind and ID are required; with one of them, stdin
// is the text for the running session.
type SendRequest struct {
	Repo      string `flag:"repo" help:"the repo key"`
	Kind      string `flag:"kind" help:"the box CLI: claude, codex or cursor"`
	ID        string `flag:"id" help:"the offload id"`
	Prepare   bool   `flag:"prepare" help:"stop before the trust preset; run only the environment step"`
	NoRepo    bool   `flag:"no-repo" help:"no repository travels"`
	Message   bool   `flag:"message" help:"send stdin as a message to the running session"`
	Back      bool   `flag:"back" help:"send BACK (and stdin, if any) to the running session"`
	Interrupt bool   `flag:"interrupt" help:"press Esc first, then deliver at once"`
}

// ReadRequest is read's flags: Since is the last outbox seq seen, Wait
// the seconds to long-poll (0 to 600).
type ReadRequest struct {
	Repo  string `flag:"repo" help:"the repo key"`
	Since int    `flag:"since,always" help:"the last seq already seen"`
	Wait  int    `flag:"wait" help:"seconds to wait for an entry, at most 600"`
}

// RepoRequest is the flags of a verb that takes only the repo key:
// status (where it is optional), end, wipe-secrets and restart.
type RepoRequest struct {
	Repo string `flag:"repo" help:"the repo key"`
}

// PostRequest is post's flags: exactly one of Progress, Question and Back.
// An empty Repo is $COCOONBOX_OFFLOAD_REPO, set in the box CLI's session.
type PostRequest struct {
	Repo     string `flag:"repo" help:"the repo key (default: $COCOONBOX_OFFLOAD_REPO)"`
	Progress bool   `flag:"progress" help:"a progress hand-over"`
	Question bool   `flag:"question" help:"a question for the user"`
	Back     bool   `flag:"back" help:"the final hand-over; makes S'"`
}

// EnvRequest is env's flags; an empty Repo is as PostRequest's.
type EnvRequest struct {
	Repo   string `flag:"repo" help:"the repo key (default: $COCOONBOX_OFFLOAD_REPO)"`
	NoWait bool   `flag:"no-wait" help:"print the report as it stands, without the inbox"`
	JSON   bool   `flag:"json" help:"print the report as one JSON line"`
}

// EventRequest is event's flags; the hook's JSON payload is stdin or the
// one positional argument (codex's notify passes it so).
type EventRequest struct {
	Repo string `flag:"repo" help:"the repo key"`
	CLI  string `flag:"cli" help:"the CLI kind"`
	Hook string `flag:"hook" help:"the hook's name"`
}

// SignInRequest is sign-in's flags; the key is stdin's first line
// (ReadAPIKey).
type SignInRequest struct {
	Kind       string `flag:"kind" help:"the box CLI: claude or codex"`
	WithAPIKey bool   `flag:"with-api-key" help:"sign in with the API key on stdin (required)"`
}

// ServeRequest is serve's flags: none.
type ServeRequest struct{}

// The verbs of `cocoonbox-agent offload` (contract "Verbs";
// docs/cocoonbox-agent.md).
var (
	Begin = Verb[BeginRequest]{Name: "begin", Use: "begin --repo K --name N --kind C --id ID [--no-repo]",
		Short: "The box half of the preflight; take the copy for the offload", Results: []any{BeginResult{}}}
	Send = Verb[SendRequest]{Name: "send", Use: "send --repo K --kind C --id ID [--prepare] [--no-repo] < stream\n  send --repo K (--message | --back) [--interrupt] < text",
		Short: "Take a send stream and start the box CLI, or hand a message or BACK to it", Results: []any{SendResult{}, MessageResult{}}}
	Read = Verb[ReadRequest]{Name: "read", Use: "read --repo K [--since N] [--wait S]",
		Short: "Outbox entries after seq N; --wait long-polls up to S (at most 600) seconds", Results: []any{ReadResult{}}}
	Status = Verb[RepoRequest]{Name: "status", Use: "status [--repo K]",
		Short: "The box's sessions", Results: []any{StatusResult{}}}
	End = Verb[RepoRequest]{Name: "end", Use: "end --repo K",
		Short: "End the CLI, wipe the secrets, mark the copy returned", Results: []any{EndResult{}}}
	WipeSecrets = Verb[RepoRequest]{Name: "wipe-secrets", Use: "wipe-secrets --repo K",
		Short: "Remove the repo's secrets now", Results: []any{OKResult{}}}
	Restart = Verb[RepoRequest]{Name: "restart", Use: "restart --repo K",
		Short: "Start the repo's CLI afresh from its last hand-over", Results: []any{RestartResult{}}}
	Post = Verb[PostRequest]{Name: "post", Use: "post (--progress | --question | --back) [--repo K] < body",
		Short: "Add an outbox entry (the box agent's report)", Results: []any{PostResult{}}}
	Env = Verb[EnvRequest]{Name: "env", Use: "env [--repo K] [--no-wait] [--json]",
		Short: "Wait for the environment step and print its report", Results: []any{EnvResult{}}}
	Event = Verb[EventRequest]{Name: "event", Use: "event --repo K --cli C --hook NAME [PAYLOAD] < payload",
		Short: "A hook's report for the inbox (run by the box CLI)", MaxArgs: 1, Results: []any{OKResult{}}}
	SignIn = Verb[SignInRequest]{Name: "sign-in", Use: "sign-in --kind C --with-api-key < key",
		Short: "Sign the box CLI in with the API key on stdin, kept where the CLI reads it", Results: []any{SignInResult{}}}
	Serve = Verb[ServeRequest]{Name: "serve", Use: "serve",
		Short: "Run the inbox (the box's service; the local box starts it)", Results: []any{OKResult{}}}
)

// Verbs lists every verb, in the order help lists them.
func Verbs() []Info {
	return []Info{Begin.Info(), Send.Info(), Read.Info(), Status.Info(), End.Info(), WipeSecrets.Info(),
		Restart.Info(), Post.Info(), Env.Info(), Event.Info(), SignIn.Info(), Serve.Info()}
}
