package localbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// The process engine's images: a box runs on this machine's own system,
// so its image is a label of the box environment's version (what the local
// box prepares in its home), which the local box records per box. Images
// lists those it offers, oldest first; LatestImage is the last of them,
// the default of a new box and where Upgrade takes a box.
const LatestImage = "localbox:v2"

// Images are the image labels the local box offers, oldest first.
var Images = []string{"localbox:v1", LatestImage}

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })

// ValidName reports whether s can name a box: 1 to 63 of a-z, 0-9 and '-',
// not starting with '-'.
func ValidName(s string) bool { return nameRE().MatchString(s) }

// boxMeta is DIR/boxes/NAME/box.json.
type boxMeta struct {
	ID            string `json:"box_id"`
	Name          string `json:"name"`
	Hibernated    bool   `json:"hibernated"`
	LastSavedAtMS int64  `json:"last_saved_at_ms"`
	// Image is the box's image label; empty (a box made before labels)
	// reads as LatestImage.
	Image string `json:"image,omitempty"`
	// SavedBytes is what the last save measured; 0 after a hibernate.
	SavedBytes int64 `json:"saved_bytes,omitempty"`
	// CreatedAtMS is when the box was made, in Unix milliseconds; 0 for a
	// box made before it was recorded, which counts as the oldest.
	CreatedAtMS int64 `json:"created_at_ms,omitempty"`
	// EngineImage is the container image a container engine made the
	// box of (cocoonbox-box:TIME); "" under the process engine.
	EngineImage string `json:"engine_image,omitempty"`
}

// box is one box: a directory with home/ and workspace/.
type box struct {
	dir string
	// account is the account the box belongs to; "" is the owner's.
	account string
	mu      sync.Mutex
	boxMeta
	// deleted is set when Delete takes the box away: no Exec starts in it.
	deleted bool
	// execs cancels the Execs running in the box, for Hibernate.
	execs map[*context.CancelFunc]struct{}
	// fresh is set when create made the box, until prepareHome gave its
	// home the skeleton's files.
	fresh bool
	// active is when a client call on the box last began or ended, or
	// the box woke: the idle clock (idle.go) runs from it.
	active time.Time
	// images is what the box's image reads as, the registry's; nil is the
	// process engine's labels.
	images *imageView
}

// imageView is the one notion of a box's image a user sees (Box.image,
// latest_image, upgrade_available): under the process engine the box's
// label and LatestImage; under a container engine the container image
// the box was made of (EngineImage) and the one the engine's
// ImageRepo:latest stands for, read again by refresh since `localbox image
// build` tags new ones beside a running server.
type imageView struct {
	mu        sync.Mutex
	container bool
	// latest is a container engine's latest box image; "" until it was
	// read.
	latest string
}

// latestImage is where an upgrade takes a box; "" on a container engine
// that has no box image yet.
func (v *imageView) latestImage() string {
	if v == nil {
		return LatestImage
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.container {
		return LatestImage
	}
	return v.latest
}

func (v *imageView) isContainer() bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.container
}

// image is the box's image as a user sees it (imageView); b.mu is held.
func (b *box) image() string {
	if b.images.isContainer() {
		return b.EngineImage
	}
	if b.Image == "" {
		return LatestImage
	}
	return b.Image
}

// engineImage is the container image box b records; "" before a
// container engine made it.
func (b *box) engineImage() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.EngineImage
}

// touch restarts the box's idle clock.
func (b *box) touch() {
	b.mu.Lock()
	b.active = time.Now()
	b.mu.Unlock()
}

func (b *box) home() string      { return filepath.Join(b.dir, "home") }
func (b *box) workspace() string { return filepath.Join(b.dir, "workspace") }

func (b *box) proto() *controlv1.Box {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := controlv1.BoxState_BOX_STATE_RUNNING
	if b.Hibernated {
		st = controlv1.BoxState_BOX_STATE_HIBERNATED
	}
	img, latest := b.image(), b.images.latestImage()
	return &controlv1.Box{BoxId: b.ID, Name: b.Name, State: st, Image: img, LatestImage: latest,
		LastSavedAtMs: b.LastSavedAtMS, UpgradeAvailable: latest != "" && img != latest}
}

func (b *box) saveLocked() error {
	data, err := json.MarshalIndent(b.boxMeta, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(b.dir, "box.json"), append(data, '\n'), 0o600)
}

// setHibernated changes the box's state and, going to sleep, ends its Execs.
func (b *box) setHibernated(h bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Hibernated == h {
		return nil
	}
	b.Hibernated = h
	b.active = time.Now()
	if h {
		b.LastSavedAtMS = time.Now().UnixMilli()
		b.SavedBytes = 0
		b.cancelExecsLocked()
	}
	return b.saveLocked()
}

// cancelExecsLocked ends the Execs running in the box.
func (b *box) cancelExecsLocked() {
	for c := range b.execs {
		(*c)()
	}
}

// register records cancel as an Exec running in the box; it fails if the
// box sleeps. The returned func unregisters it. Both restart the idle clock.
func (b *box) register(cancel *context.CancelFunc) (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Hibernated || b.deleted {
		return nil, false
	}
	b.execs[cancel] = struct{}{}
	b.active = time.Now()
	return func() {
		b.mu.Lock()
		delete(b.execs, cancel)
		b.active = time.Now()
		b.mu.Unlock()
	}, true
}

// registry holds the boxes of every account: the owner's under
// DIR/boxes, each other account's under DIR/accounts/NAME/boxes.
type registry struct {
	dir   string
	mu    sync.Mutex
	boxes map[string]*box // by boxKey
	// images is what its boxes' images read as; nil is the process
	// engine's labels.
	images *imageView
}

func boxKey(account, name string) string { return account + "/" + name }

// boxesDir is where account's boxes are ("" for the owner's).
func (r *registry) boxesDir(account string) string {
	if account == "" {
		return filepath.Join(r.dir, "boxes")
	}
	return accountBoxesDir(r.dir, account)
}

// BoxNames are the names of the owner's boxes of the local box whose state
// is in dir, sorted; none when it has none or they cannot be read.
func BoxNames(dir string) []string {
	boxes := filepath.Join(dir, "boxes")
	ents, _ := os.ReadDir(boxes)
	var names []string
	for _, e := range ents {
		if fi, err := os.Lstat(filepath.Join(boxes, e.Name(), "box.json")); e.IsDir() && err == nil && fi.Mode().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names
}

// load reads the owner's boxes; an account's are read by loadAccount.
func (r *registry) load() error {
	r.mu.Lock()
	r.boxes = map[string]*box{}
	r.mu.Unlock()
	return r.loadAccount("")
}

// loadAccount reads account's boxes into the registry.
func (r *registry) loadAccount(account string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	root := r.boxesDir(account)
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() || !ValidName(e.Name()) {
			continue
		}
		b := &box{dir: filepath.Join(root, e.Name()), account: account, execs: map[*context.CancelFunc]struct{}{}, active: time.Now(), images: r.images}
		data, err := os.ReadFile(filepath.Join(b.dir, "box.json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // not a box (yet): create makes it one
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &b.boxMeta); err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(b.dir, "box.json"), err)
		}
		if _, ok := r.boxes[boxKey(account, b.Name)]; !ok {
			r.boxes[boxKey(account, b.Name)] = b
		}
	}
	return nil
}

// create makes the owner's box name (home/, workspace/, box.json); an
// existing box is returned as it is.
func (r *registry) create(name string) (*box, error) {
	b, _, err := r.add("", name)
	return b, err
}

// add makes account's box name, or returns the existing one with created
// false.
func (r *registry) add(account, name string) (b *box, created bool, err error) {
	return r.addImage(account, name, LatestImage)
}

// addImage is add with the new box's image label.
func (r *registry) addImage(account, name, image string) (b *box, created bool, err error) {
	if !ValidName(name) {
		return nil, false, fmt.Errorf("bad box name %q: use 1 to 63 of a-z, 0-9 and -", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.boxes[boxKey(account, name)]; ok {
		return b, false, nil
	}
	id := make([]byte, 8)
	rand.Read(id)
	b = &box{
		dir:     filepath.Join(r.boxesDir(account), name),
		account: account,
		boxMeta: boxMeta{ID: "box_" + hex.EncodeToString(id), Name: name, Image: image, CreatedAtMS: time.Now().UnixMilli()},
		execs:   map[*context.CancelFunc]struct{}{},
		fresh:   true,
		active:  time.Now(),
		images:  r.images,
	}
	if account != "" {
		// The way down to an account's boxes is root's and 0711, made
		// when the account was added; a box is never made through a
		// directory that is not.
		if err := mkdirAccount(r.dir, account); err != nil {
			return nil, false, err
		}
	}
	// The run directory is chownBox's to make: it goes at every stop.
	for _, d := range []string{b.home(), b.workspace()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, false, err
		}
	}
	if err := b.saveLocked(); err != nil {
		return nil, false, err
	}
	r.boxes[boxKey(account, name)] = b
	return b, true, nil
}

// skelDir holds the files a new user's home starts with.
const skelDir = "/etc/skel"

// skelFiles are the files of skelDir a new box home gets. Not
// .bash_logout: Debian's clears the screen when a login shell ends, which
// an ssh-shaped `-T` login would print as stray bytes.
var skelFiles = []string{".profile", ".bashrc"}

// prepareScript is prepareHome's, run as the box user: $1 is
// cocoonbox-agent's path or "", $2 skelDir, the rest skeleton files to
// copy where the home has nothing of that name. The agent, and
// cocoonbox-session where it is beside it, get links of the same name in
// ~/.local/bin: a link of ours to another one is replaced; a file that is
// no link is the user's, and stays.
const prepareScript = `umask 022
agent=$1 skel=$2
shift 2
for f; do
	[ -e "$HOME/$f" ] || [ -L "$HOME/$f" ] || cp "$skel/$f" "$HOME/$f" 2>/dev/null || :
done
[ -n "$agent" ] || exit 0
mkdir -p "$HOME/.local/bin"
for t in "$agent" "${agent%/*}/cocoonbox-session"; do
	[ -x "$t" ] || continue
	p=$HOME/.local/bin/${t##*/}
	if [ -L "$p" ]; then
		[ "$(readlink "$p")" = "$t" ] || ln -sfn "$t" "$p"
	elif [ ! -e "$p" ]; then
		ln -s "$t" "$p"
	fi
done
`

// prepareHome, as box b's user, gives a home that create just made the
// machine's /etc/skel shell files, as useradd does, so a login shell in the
// box reads a .profile (Debian's puts ~/.local/bin, where CLI installers
// put themselves, on the PATH); and it puts cocoonbox-agent on the box's
// login PATH, a link at ~/.local/bin/cocoonbox-agent, as a box image
// installs it. A login shell (bash -l, which the box CLIs run for their
// hooks) resets PATH from /etc/profile and ~/.profile; the server's own
// PATH does not reach it. A failure is logged: the box still serves.
func (s *Server) prepareHome(b *box) {
	agent := s.agentPath()
	if agent != "" {
		if a, err := filepath.Abs(agent); err == nil {
			agent = a
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var skel []string
	if b.fresh {
		skel = skelFiles
	}
	if err := s.asUser(b, nil, cmp.Or(s.homeScript, prepareScript), append([]string{agent, skelDir}, skel...)...); err != nil {
		s.logf("box %s: prepare its home (skeleton files, cocoonbox-agent on the login PATH): %v", b.Name, err)
		return
	}
	b.fresh = false
}

// prepareHomes prepares the homes of bs (prepareHome) all at once, and
// waits for them.
func (s *Server) prepareHomes(bs []*box) {
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(func() { s.prepareHome(b) })
	}
	wg.Wait()
}

// get finds a box of account by name or id.
func (r *registry) get(account, ref string) (*box, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.boxes[boxKey(account, ref)]; ok {
		return b, true
	}
	for _, b := range r.boxes {
		if b.ID == ref && b.account == account {
			return b, true
		}
	}
	return nil, false
}

// list returns account's boxes, by name.
func (r *registry) list(account string) []*box {
	return r.listWhere(func(b *box) bool { return b.account == account })
}

// all returns every account's boxes.
func (r *registry) all() []*box { return r.listWhere(func(*box) bool { return true }) }

func (r *registry) listWhere(keep func(*box) bool) []*box {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*box, 0, len(r.boxes))
	for _, b := range r.boxes {
		if keep(b) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].account != out[j].account {
			return out[i].account < out[j].account
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// remove takes b out of the registry and marks it deleted, ending its
// Execs: no new one starts in it.
func (r *registry) remove(b *box) {
	r.mu.Lock()
	if r.boxes[boxKey(b.account, b.Name)] == b {
		delete(r.boxes, boxKey(b.account, b.Name))
	}
	r.mu.Unlock()
	b.mu.Lock()
	b.deleted = true
	b.cancelExecsLocked()
	b.mu.Unlock()
}

// idle waits until no Exec runs in b, at most d, and reports whether none does.
func (b *box) idle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		b.mu.Lock()
		n := len(b.execs)
		b.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
