package offload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"golang.org/x/mod/modfile"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// lockfiles are looked for at the top, in this order.
var lockfiles = []string{
	"go.sum", "Cargo.lock", "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml",
	"yarn.lock", "bun.lockb", "bun.lock", "uv.lock", "poetry.lock", "Pipfile.lock",
	"requirements.txt", "Gemfile.lock", "composer.lock", "mix.lock",
}

// asdfNames maps .tool-versions and mise tool names to env.json's.
var asdfNames = map[string]string{"golang": "go", "nodejs": "node", "rust": "rust", "python": "python"}

// DetectEnvironment reads the version files at top: go.mod (toolchain,
// else go), rust-toolchain.toml and rust-toolchain, .tool-versions,
// mise.toml and .mise.toml, package.json (engines, volta,
// packageManager), .nvmrc and .node-version, .python-version. A file
// earlier in that list wins for a tool it names, except that the
// tool-manager files (.tool-versions, mise) win over all, as mise reads
// them. A file that does not parse is an error naming it.
func DetectEnvironment(top string) (*agentwire.Environment, error) {
	e := &agentwire.Environment{V: 1, Tools: map[string]string{}, PackageManagers: map[string]string{}, Files: []string{}, Lockfiles: []string{}}
	read := func(name string) ([]byte, bool, error) {
		b, err := os.ReadFile(filepath.Join(top, name))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		e.Files = append(e.Files, name)
		return b, true, nil
	}
	set := func(tool, v string) {
		v = strings.TrimSpace(v)
		if v != "" {
			e.Tools[tool] = v
		}
	}
	setFirst := func(tool, v string) {
		if _, ok := e.Tools[tool]; !ok {
			set(tool, v)
		}
	}
	bad := func(name string, err error) error { return &EnvFileError{File: name, Err: err} }

	if b, ok, err := read("go.mod"); err != nil {
		return nil, err
	} else if ok {
		f, err := modfile.Parse("go.mod", b, nil)
		if err != nil {
			return nil, bad("go.mod", err)
		}
		switch {
		case f.Toolchain != nil && strings.HasPrefix(f.Toolchain.Name, "go1"):
			set("go", strings.TrimPrefix(f.Toolchain.Name, "go"))
		case f.Go != nil:
			set("go", f.Go.Version)
		}
	}
	if b, ok, err := read("rust-toolchain.toml"); err != nil {
		return nil, err
	} else if ok {
		var v struct {
			Toolchain struct{ Channel string } `toml:"toolchain"`
		}
		if _, err := toml.Decode(string(b), &v); err != nil {
			return nil, bad("rust-toolchain.toml", err)
		}
		set("rust", v.Toolchain.Channel)
	} else if b, ok, err := read("rust-toolchain"); err != nil {
		return nil, err
	} else if ok {
		set("rust", firstLine(b))
	}
	if b, ok, err := read("package.json"); err != nil {
		return nil, err
	} else if ok {
		var v struct {
			Engines        map[string]string `json:"engines"`
			Volta          map[string]string `json:"volta"`
			PackageManager string            `json:"packageManager"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, bad("package.json", err)
		}
		if n := v.Volta["node"]; n != "" {
			set("node", n)
		} else if n := v.Engines["node"]; n != "" {
			set("node", n)
		}
		if name, ver, ok := strings.Cut(v.PackageManager, "@"); ok && name != "" {
			ver, _, _ = strings.Cut(ver, "+") // a corepack hash
			e.PackageManagers[name] = ver
		}
		for _, pm := range []string{"pnpm", "yarn", "npm"} {
			if ver := v.Volta[pm]; ver != "" {
				if _, ok := e.PackageManagers[pm]; !ok {
					e.PackageManagers[pm] = ver
				}
			}
		}
	}
	for _, f := range []string{".nvmrc", ".node-version"} {
		if b, ok, err := read(f); err != nil {
			return nil, err
		} else if ok {
			setFirst("node", strings.TrimPrefix(firstLine(b), "v"))
		}
	}
	if b, ok, err := read(".python-version"); err != nil {
		return nil, err
	} else if ok {
		setFirst("python", firstLine(b))
	}
	// The tool managers' own files decide last, as they decide for mise.
	if b, ok, err := read(".tool-versions"); err != nil {
		return nil, err
	} else if ok {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			f := strings.Fields(line)
			if len(f) >= 2 {
				set(toolName(f[0]), f[1])
			}
		}
	}
	for _, name := range []string{".mise.toml", "mise.toml"} {
		if b, ok, err := read(name); err != nil {
			return nil, err
		} else if ok {
			var v struct {
				Tools map[string]any `toml:"tools"`
			}
			if _, err := toml.Decode(string(b), &v); err != nil {
				return nil, bad(name, err)
			}
			for k, val := range v.Tools {
				switch val := val.(type) {
				case string:
					set(toolName(k), val)
				case []any:
					if len(val) > 0 {
						if s, ok := val[0].(string); ok {
							set(toolName(k), s)
						}
					}
				case map[string]any:
					if s, ok := val["version"].(string); ok {
						set(toolName(k), s)
					}
				}
			}
		}
	}
	for _, l := range lockfiles {
		if fi, err := os.Stat(filepath.Join(top, l)); err == nil && fi.Mode().IsRegular() {
			e.Lockfiles = append(e.Lockfiles, l)
		}
	}
	return e, nil
}

func toolName(n string) string {
	if t, ok := asdfNames[n]; ok {
		return t
	}
	return n
}

func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// EnvFileError is a version file that does not parse.
type EnvFileError struct {
	File string
	Err  error
}

func (e *EnvFileError) Error() string { return "read " + e.File + ": " + e.Err.Error() }
func (e *EnvFileError) Unwrap() error { return e.Err }
