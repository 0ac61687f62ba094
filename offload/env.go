package offload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	tomlTools := func(b []byte) error {
		var v struct {
			Tools map[string]any `toml:"tools"`
		}
		if _, err := toml.Decode(string(b), &v); err != nil {
			return err
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
		return nil
	}
	nodeVersion := func(b []byte) error {
		setFirst("node", strings.TrimPrefix(firstLine(b), "v"))
		return nil
	}
	// Each version file in order; unless names one whose presence skips
	// it; parse's error is the file's (EnvFileError).
	for _, vf := range []struct {
		name, unless string
		parse        func(b []byte) error
	}{
		{name: "go.mod", parse: func(b []byte) error {
			f, err := modfile.Parse("go.mod", b, nil)
			if err != nil {
				return err
			}
			switch {
			case f.Toolchain != nil && strings.HasPrefix(f.Toolchain.Name, "go1"):
				set("go", strings.TrimPrefix(f.Toolchain.Name, "go"))
			case f.Go != nil:
				set("go", f.Go.Version)
			}
			return nil
		}},
		{name: "rust-toolchain.toml", parse: func(b []byte) error {
			var v struct {
				Toolchain struct{ Channel string } `toml:"toolchain"`
			}
			if _, err := toml.Decode(string(b), &v); err != nil {
				return err
			}
			set("rust", v.Toolchain.Channel)
			return nil
		}},
		{name: "rust-toolchain", unless: "rust-toolchain.toml", parse: func(b []byte) error {
			set("rust", firstLine(b))
			return nil
		}},
		{name: "package.json", parse: func(b []byte) error {
			var v struct {
				Engines        map[string]string `json:"engines"`
				Volta          map[string]string `json:"volta"`
				PackageManager string            `json:"packageManager"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				return err
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
			return nil
		}},
		{name: ".nvmrc", parse: nodeVersion},
		{name: ".node-version", parse: nodeVersion},
		{name: ".python-version", parse: func(b []byte) error {
			setFirst("python", firstLine(b))
			return nil
		}},
		// The tool managers' own files decide last, as they decide for mise.
		{name: ".tool-versions", parse: func(b []byte) error {
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				line, _, _ := strings.Cut(sc.Text(), "#")
				f := strings.Fields(line)
				if len(f) >= 2 {
					set(toolName(f[0]), f[1])
				}
			}
			return nil
		}},
		{name: ".mise.toml", parse: tomlTools},
		{name: "mise.toml", parse: tomlTools},
	} {
		if vf.unless != "" && slices.Contains(e.Files, vf.unless) {
			continue
		}
		b, ok, err := read(vf.name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := vf.parse(b); err != nil {
			return nil, &EnvFileError{File: vf.name, Err: err}
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
