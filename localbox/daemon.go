package localbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/jsonfile"
	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// The lifecycle of the local box of one state directory: the server that
// serves it holds STATE/localbox.lock for its whole life and writes
// STATE/localbox.json (Runtime) while it serves; Start runs one detached
// and waits until it serves, Stop ends it, ReadRuntime says whether one
// serves (docs/self-hosting.md).

// Runtime is STATE/localbox.json, written by a serving local box and
// removed when it stops.
type Runtime struct {
	PID      int    `json:"pid"`
	Endpoint string `json:"endpoint"`
	// Fingerprint is the SHA-256 of the TLS certificate; empty without TLS.
	Fingerprint string `json:"fingerprint,omitempty"`
	// CA is the self-signed certificate, which clients on this machine pin;
	// empty otherwise. NewCA says this serve made it anew, ReplacedCA that
	// it replaced an older one.
	CA         string `json:"ca,omitempty"`
	NewCA      bool   `json:"new_ca,omitempty"`
	ReplacedCA bool   `json:"replaced_ca,omitempty"`
	// RunAs is the Unix user the owner's box commands run as, and
	// RunAsNote what start and status add to its name.
	RunAs     string `json:"run_as,omitempty"`
	RunAsNote string `json:"run_as_note,omitempty"`
	// Laptop is the endpoint other computers use, when it is not Endpoint
	// (this machine's): for a server on every address, the name of its
	// certificate's that is not a loopback one or a wildcard, or this
	// machine's host name for a self-signed one; empty otherwise.
	Laptop string `json:"laptop,omitempty"`
	// Engine is the engine its boxes run on (EngineSettings.Engine);
	// empty in the file of a local box older than the field.
	Engine string `json:"engine,omitempty"`
}

// startTimeout is how long Start waits for the server it started to serve.
const startTimeout = 15 * time.Second

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 10 * time.Second

// ErrServing is Lock's error when another process serves the state
// directory.
var ErrServing = errors.New("a local box already serves this state directory")

// RuntimePath is the Runtime file of the state directory dir.
func RuntimePath(dir string) string { return filepath.Join(dir, "localbox.json") }

func lockPath(dir string) string { return filepath.Join(dir, "localbox.lock") }

// ReadRuntime returns the local box that serves dir, or ok false: none,
// or only the file of one that died.
func ReadRuntime(dir string) (Runtime, bool) {
	ri, ok := readRuntimeFile(dir)
	if !ok {
		return ri, false
	}
	// The serving process holds the lock for its whole life; a file left
	// by one that died (its pid perhaps reused since) is stale.
	if !proc.Alive(ri.PID) || !lockHeld(dir) {
		return ri, false
	}
	return ri, true
}

// readRuntimeFile is dir's Runtime file as it is, whoever wrote it.
func readRuntimeFile(dir string) (Runtime, bool) {
	var ri Runtime
	b, err := os.ReadFile(RuntimePath(dir))
	if err != nil || json.Unmarshal(b, &ri) != nil || ri.PID <= 0 {
		return ri, false
	}
	return ri, true
}

// lockHeld reports whether a serving local box holds dir's lock.
func lockHeld(dir string) bool {
	f, err := os.Open(lockPath(dir))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := flock.Lock(f, flock.NoWait); err != nil {
		return true
	}
	flock.Unlock(f)
	return false
}

// Lock takes dir's lock for the server this process is to be, so that a
// second one is refused (ErrServing) and only the holder writes and
// removes the Runtime file. The lock is held until the returned file is
// closed (or the process ends); dir must exist (MkdirState).
func Lock(dir string) (*os.File, error) {
	lock, err := os.OpenFile(lockPath(dir), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flock.Lock(lock, flock.Exclusive|flock.NoWait); err != nil {
		lock.Close()
		return nil, ErrServing
	}
	return lock, nil
}

// WriteRuntime writes ri as dir's Runtime file, 0600, replacing it
// atomically. Only Lock's holder writes it, and it removes the file with
// RemoveRuntime when it stops serving.
func WriteRuntime(dir string, ri Runtime) error {
	info, err := json.Marshal(ri)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(RuntimePath(dir), info, 0o600)
}

// RemoveRuntime removes dir's Runtime file.
func RemoveRuntime(dir string) error { return os.Remove(RuntimePath(dir)) }

// Listening is how `localbox start` was last told to listen: its --listen
// and TLS flags, which a start given none of them reuses, so that a plain
// start after a TLS one does not move the local box off the address its
// laptops use. The zero value is the default, the unix socket alone.
type Listening struct {
	// Listen is --listen: "unix:PATH" or HOST:PORT.
	Listen string `json:"listen,omitempty"`
	// TLS is --tls ("self-signed"); TLSCert and TLSKey are --tls-cert and
	// --tls-key as absolute paths; TLSNames the --tls-name values.
	TLS      string   `json:"tls,omitempty"`
	TLSCert  string   `json:"tls_cert,omitempty"`
	TLSKey   string   `json:"tls_key,omitempty"`
	TLSNames []string `json:"tls_names,omitempty"`
	// Endpoint is the endpoint the local box served at after that start,
	// which a client that finds nothing there is told to start again
	// with a plain start: these flags, not a --listen of its address.
	Endpoint string `json:"endpoint,omitempty"`
}

// ListeningPath is the Listening file of the state directory dir.
func ListeningPath(dir string) string { return filepath.Join(dir, "listen.json") }

// ReadListening returns the Listening saved in dir, the zero value when
// there is none; a file that does not decode is an error naming it.
func ReadListening(dir string) (Listening, error) {
	var l Listening
	_, err := jsonfile.Read(ListeningPath(dir), &l)
	return l, err
}

// SaveListening saves l in dir (0600, replaced atomically); with no
// flag (the default socket, whatever its Endpoint) it removes the file.
func SaveListening(dir string, l Listening) error {
	if l.Listen == "" && l.TLS == "" && l.TLSCert == "" && l.TLSKey == "" && len(l.TLSNames) == 0 {
		if err := os.Remove(ListeningPath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return jsonfile.Write(ListeningPath(dir), l, 0o600)
}

// Start runs cmd, a command that serves dir (`cocoonbox localbox serve`
// with its flags: Path, Args and Env set), detached: in a session of its
// own, with STATE/localbox.log as its stdout and stderr and no descriptor
// of this process but those. It then reads dir's Runtime every 50 ms until
// one served by cmd (or, when cmd lost the race for the lock to another
// start, by the winner) is accepted by adopt, and returns it. adopt
// reports whether the caller has taken the local box ri as its own (false
// makes Start look again). The error, when cmd exits first, is the last
// error its log holds; after 15 s Start sends cmd SIGTERM and fails.
func Start(dir string, cmd *exec.Cmd, adopt func(ri Runtime) bool) (Runtime, error) {
	logPath := filepath.Join(dir, "localbox.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Runtime{}, err
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd)
	// The server gets our stdio's replacements and nothing else of ours.
	CloseInherited()
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.NewSession(cmd)
	if err := cmd.Start(); err != nil {
		return Runtime{}, fmt.Errorf("start the local box: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(startTimeout)
	lost := false
	for {
		if ri, ok := ReadRuntime(dir); ok && (ri.PID == cmd.Process.Pid || lost) && adopt(ri) {
			return ri, nil
		}
		select {
		case err := <-exited:
			// Another start may have won the race for the state's lock:
			// then take its local box.
			if lockHeld(dir) {
				lost = true
				continue
			}
			if why := lastLine(logPath, logStart); why != "" {
				return Runtime{}, fmt.Errorf("the local box did not start: %s\nits log is %s", why, logPath)
			}
			return Runtime{}, fmt.Errorf("the local box exited at start (%v); its log is %s", err, logPath)
		case <-deadline:
			cmd.Process.Signal(syscall.SIGTERM)
			return Runtime{}, fmt.Errorf("the local box did not answer within %v; its log is %s", startTimeout, logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lastLine is the last error written to the log at path after offset: the
// error a serve that failed printed, without its "cocoonbox: ".
func lastLine(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, 64<<10))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// An error of several lines (the problem, then the next steps) is
	// the serve's last "cocoonbox: " line and the lines after it.
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "cocoonbox: ") {
			return strings.TrimPrefix(strings.Join(lines[i:], "\n"), "cocoonbox: ")
		}
	}
	return lines[len(lines)-1]
}

// Stop ends the local box ri that serves dir (ReadRuntime's): SIGTERM, then
// up to 10 s for it to remove its Runtime file, which it does once it
// has stopped, or to be gone without (killed, as a kill -9 a moment
// before, whose process was still ending when ReadRuntime looked: the
// file is then removed); after that SIGKILL, the file removed, and an
// error that says so.
func Stop(dir string, ri Runtime) error {
	proc.Signal(ri.PID, syscall.SIGTERM)
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(RuntimePath(dir)); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !proc.Alive(ri.PID) || !lockHeld(dir) {
			// Not a file a local box started since has written.
			if now, ok := readRuntimeFile(dir); ok && now.PID == ri.PID {
				RemoveRuntime(dir)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	proc.Signal(ri.PID, syscall.SIGKILL)
	RemoveRuntime(dir)
	return fmt.Errorf("the local box (pid %d) did not stop within %v and was killed", ri.PID, stopTimeout)
}
