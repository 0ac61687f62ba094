package localbox

// Purge removes what a local box made on this machine (docs/cocoonbox.md
// "localbox purge"): its box commands and inboxes, its boxes, the Unix
// users it made (useradd), its claims of users, and its state directory.
// On a container engine its boxes' containers, volumes and networks go
// from the engine first (PurgeEngine). Each step is done again by the next purge when one is cut short (a
// kill, an error), and finds done what was: the users go before their
// claims, and the state directory, which records the rest only in part,
// goes last; what marks a user as the local box's is the comment useradd
// gave it (gecosMark), which outlives the state directory.

// PurgeOptions are the settings of Purge and PurgeOrphans.
type PurgeOptions struct {
	// ClaimsDir is the claims directory; empty: DefaultClaimsDir.
	ClaimsDir string
	// Step, when not nil, is called before each step by its name (procs,
	// engine, boxes, users, claims, state): the test hook of a kill at a step.
	Step func(name string)
}

// PurgePlan is what a purge removes, or removed.
type PurgePlan struct {
	// StateDir is the absolute state directory, "" for PurgeOrphans;
	// StateExists says it is there.
	StateDir    string
	StateExists bool
	// Boxes are its boxes: NAME for the owner's, ACCOUNT/NAME for an
	// account's.
	Boxes []string
	// Users are the Unix users the local box made, which are deleted
	// (their uids and gids retired), and Kept those it was given (the
	// Unix user `user`, a --unix-user), whose processes of the local box
	// end and which stay.
	Users, Kept []string
	// Claims are the claims released, by user name.
	Claims []string
	// Engine is the container engine the local box last ran on
	// (engine.json), whose containers, volumes and networks of its boxes
	// go too; "" for the process engine.
	Engine string
	// Orphans are, for PurgeOrphans, the gone state directories whose
	// containers, volumes and networks go from each engine.
	Orphans []EngineOrphans
}

// Empty reports whether there is nothing to remove.
func (p PurgePlan) Empty() bool {
	return !p.StateExists && len(p.Users) == 0 && len(p.Kept) == 0 && len(p.Claims) == 0 && len(p.Orphans) == 0
}
