package offload

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

func TestDetectEnvironment(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  agentwire.Environment
	}{
		{
			name:  "go toolchain wins over go",
			files: map[string]string{"go.mod": "module x\n\ngo 1.26.0\n\ntoolchain go1.26.5\n", "go.sum": ""},
			want:  agentwire.Environment{Tools: map[string]string{"go": "1.26.5"}, Files: []string{"go.mod"}, Lockfiles: []string{"go.sum"}},
		},
		{
			name:  "go directive",
			files: map[string]string{"go.mod": "module x\ngo 1.25\n"},
			want:  agentwire.Environment{Tools: map[string]string{"go": "1.25"}, Files: []string{"go.mod"}},
		},
		{
			name:  "rust-toolchain.toml",
			files: map[string]string{"rust-toolchain.toml": "[toolchain]\nchannel = \"1.88.0\"\ncomponents = [\"clippy\"]\n", "Cargo.lock": ""},
			want:  agentwire.Environment{Tools: map[string]string{"rust": "1.88.0"}, Files: []string{"rust-toolchain.toml"}, Lockfiles: []string{"Cargo.lock"}},
		},
		{
			name:  "rust-toolchain plain",
			files: map[string]string{"rust-toolchain": "stable\n"},
			want:  agentwire.Environment{Tools: map[string]string{"rust": "stable"}, Files: []string{"rust-toolchain"}},
		},
		{
			name: "package.json engines and packageManager, .nvmrc second",
			files: map[string]string{
				"package.json":   `{"engines": {"node": ">=20"}, "packageManager": "pnpm@9.12.0+sha512.abc"}`,
				".nvmrc":         "v22.11.0\n",
				"pnpm-lock.yaml": "",
			},
			want: agentwire.Environment{Tools: map[string]string{"node": ">=20"}, PackageManagers: map[string]string{"pnpm": "9.12.0"},
				Files: []string{"package.json", ".nvmrc"}, Lockfiles: []string{"pnpm-lock.yaml"}},
		},
		{
			name:  "volta",
			files: map[string]string{"package.json": `{"volta": {"node": "22.11.0", "yarn": "1.22.22"}}`},
			want:  agentwire.Environment{Tools: map[string]string{"node": "22.11.0"}, PackageManagers: map[string]string{"yarn": "1.22.22"}, Files: []string{"package.json"}},
		},
		{
			name:  ".nvmrc alone, .python-version",
			files: map[string]string{".nvmrc": "# comment\nv22.11.0\n", ".python-version": "3.12.7\n", "uv.lock": ""},
			want: agentwire.Environment{Tools: map[string]string{"node": "22.11.0", "python": "3.12.7"},
				Files: []string{".nvmrc", ".python-version"}, Lockfiles: []string{"uv.lock"}},
		},
		{
			name: ".tool-versions wins",
			files: map[string]string{
				"go.mod":         "module x\ngo 1.24\n",
				".tool-versions": "golang 1.26.5 # pinned\nnodejs 22.11.0\npython 3.12.7 3.11.0\n",
			},
			want: agentwire.Environment{Tools: map[string]string{"go": "1.26.5", "node": "22.11.0", "python": "3.12.7"},
				Files: []string{"go.mod", ".tool-versions"}},
		},
		{
			name:  "mise.toml",
			files: map[string]string{"mise.toml": "[tools]\nnode = \"22\"\npython = [\"3.12\", \"3.11\"]\nterraform = { version = \"1.9.0\" }\n"},
			want:  agentwire.Environment{Tools: map[string]string{"node": "22", "python": "3.12", "terraform": "1.9.0"}, Files: []string{"mise.toml"}},
		},
		{
			name:  "nothing",
			files: map[string]string{"README": "hi"},
			want:  agentwire.Environment{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			got, err := DetectEnvironment(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.V = 1
			for _, m := range []*map[string]string{&want.Tools, &want.PackageManagers} {
				if *m == nil {
					*m = map[string]string{}
				}
			}
			for _, l := range []*[]string{&want.Files, &want.Lockfiles} {
				if *l == nil {
					*l = []string{}
				}
			}
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectEnvironmentBadFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"package.json": "{not json"})
	_, err := DetectEnvironment(dir)
	var fe *EnvFileError
	if !errors.As(err, &fe) || fe.File != "package.json" {
		t.Fatalf("got %v, want an *EnvFileError for package.json", err)
	}
}
