package localbox

import "github.com/cocoonbox/cocoonbox/internal/jsonfile"

// readJSONFile reads the JSON file path into a T; a missing file is T's zero
// value.
func readJSONFile[T any](path string) (T, error) {
	var v T
	_, err := jsonfile.Read(path, &v)
	return v, err
}

// updateJSONFile applies mutate to the JSON file path (T's zero value
// when missing) under an flock of path.lock and, unless mutate fails,
// writes it atomically (0600); it returns what it wrote. Every change to
// the state's JSON files is such a read-modify-write, so the server and
// the admin commands in another process can change them at once.
func updateJSONFile[T any](path string, mutate func(*T) error) (T, error) {
	v, err := jsonfile.Update(path, path+".lock", 0o600, func(old *T) (*T, error) {
		if old == nil {
			old = new(T)
		}
		return old, mutate(old)
	})
	if v == nil {
		var zero T
		return zero, err
	}
	return *v, err
}
