package offload

import "fmt"

// Step is one next step of an Error, one line for the user: its parts
// in order, each a string or a Command. The cli package renders it, so
// that the command lines it names are spelled where the commands are:
// this package knows what to run, never how it is typed.
type Step []any

// Command is a cocoonbox command a Step names.
type Command struct {
	// Verb is the command.
	Verb Verb
	// Kind and Box are its --kind and --box, when not empty (for VerbRsh,
	// Box is the box it runs in).
	Kind, Box string
	// Wait is VerbInbox's --wait, in seconds, when not 0.
	Wait int
	// Yes is --yes.
	Yes bool
	// Force is --force.
	Force bool
	// Terminal is rsh's -t: the command gets a terminal.
	Terminal bool
	// Args are the words after the flags: a secret entry, rsh's command.
	Args []string
}

// Verb is a cocoonbox command a Step can name.
type Verb int

// The commands a Step can name.
const (
	VerbOffload        Verb = iota + 1 // an offload
	VerbHandoverPrompt                 // offload's hand-over prompt for the local agent
	VerbHandoverPath                   // the hand-over's path, and its template
	VerbBack                           // a back
	VerbAbandon
	VerbRestart
	VerbInbox
	VerbStatus
	VerbSignIn
	VerbInstallCLI
	VerbSecretsAdd
	VerbSecretsRemove
	VerbBoxes     // the list of boxes
	VerbRsh       // a command in a box
	VerbLocalbox  // the local box's status
	VerbLocalMove // the local box served again from a state directory the box user reaches
)

// The commands the steps name most.
var (
	cmdBack    = Command{Verb: VerbBack}
	cmdAbandon = Command{Verb: VerbAbandon}
	cmdRestart = Command{Verb: VerbRestart}
)

// say is a Step of one string, for a step that names no command.
func say(format string, a ...any) Step { return Step{fmt.Sprintf(format, a...)} }

// Text is the step as plain text, each Command shown by render.
func (s Step) Text(render func(Command) string) string {
	var b []byte
	for _, p := range s {
		switch p := p.(type) {
		case Command:
			b = append(b, render(p)...)
		default:
			b = fmt.Append(b, p)
		}
	}
	return string(b)
}

// backAgain is the step of a back that changed nothing.
var backAgain = Step{"nothing changed here; run ", cmdBack, " again"}
