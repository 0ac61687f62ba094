package cli

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/offload"
)

// completionTimeout bounds the one call a completion makes: a shell waits
// for it on every TAB, and a box that does not answer must not hang one.
const completionTimeout = 2 * time.Second

// boxNames completes a box name: the names of one short Boxes.List at the
// endpoint (the command's --endpoint, else the usual one). Nothing, and
// no file names, when it cannot be had.
func boxNames(env Env, endpoint *string) cobra.CompletionFunc {
	return boxNamesAt(func() (*box.Client, error) { return env.dial(deref(endpoint)) })
}

// boxNamesAt is boxNames with the client dial makes.
func boxNamesAt(dial func() (*box.Client, error)) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var names []cobra.Completion
		listWith(dial, func(ctx context.Context, c *box.Client) {
			boxes, err := c.List(ctx)
			if err != nil {
				return
			}
			for _, b := range boxes {
				if strings.HasPrefix(b.Name, prefix) {
					names = append(names, cobra.CompletionWithDesc(b.Name, string(b.State)))
				}
			}
		})
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// deviceIDs completes a device id from one short Account.ListDevices.
func deviceIDs(env Env, endpoint *string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var ids []cobra.Completion
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		listWith(func() (*box.Client, error) { return env.dial(deref(endpoint)) }, func(ctx context.Context, c *box.Client) {
			devs, err := c.ListDevices(ctx)
			if err != nil {
				return
			}
			for _, d := range devs {
				if strings.HasPrefix(d.ID, prefix) {
					desc := d.Name + " (" + d.Client + ")"
					if d.Current {
						desc += ", this CLI"
					}
					ids = append(ids, cobra.CompletionWithDesc(d.ID, desc))
				}
			}
		})
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// listWith runs f with the client dial makes and a context of
// completionTimeout.
func listWith(dial func() (*box.Client, error), f func(context.Context, *box.Client)) {
	c, err := dial()
	if err != nil {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	f(ctx, c)
}

// onlyFirst completes the first positional argument with f and nothing
// after it.
func onlyFirst(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, prefix)
	}
}

// rshBox completes rsh's box, the first word that is not an option; rsh
// parses ssh's options itself, so an option's argument (-l NAME) is
// skipped too, and the remote command is left to the shell.
func rshBox(env Env) cobra.CompletionFunc {
	boxes := boxNames(env, nil)
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		for i := 0; i < len(args); i++ {
			a := args[i]
			if !strings.HasPrefix(a, "-") || a == "-" {
				return nil, cobra.ShellCompDirectiveDefault
			}
			if len(a) == 2 && strings.ContainsRune("BbcDEeFIiJLlmOoPpQRSWw", rune(a[1])) {
				i++
			}
		}
		if strings.HasPrefix(prefix, "-") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return boxes(cmd, args, prefix)
	}
}

// kinds completes --kind.
func kinds(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, k := range offload.KindNames() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// bashInitCompletion replaces the init function of cobra's bash script
// (GenBashCompletionV2), which calls the bash-completion package's
// _get_comp_words_by_ref and so fails without it ("command not found"):
// this one uses the package when it is loaded, and else bash's own words,
// joined back where COMP_WORDBREAKS split them at = or : (what -n =: asks
// of _get_comp_words_by_ref), so that --kind=c completes as a flag's
// value. PROG is the program's name.
const bashInitCompletion = `
# Works without the bash-completion package too: then the words are bash's
# own, joined back where COMP_WORDBREAKS split them at = or :.
__PROG_init_completion()
{
    COMPREPLY=()
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    local line=${COMP_LINE-${COMP_WORDS[*]}} i w blank sep='^[=:]+$'
    words=()
    cword=0
    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
        w=${COMP_WORDS[i]}
        blank=
        [[ $line == [[:blank:]]* ]] && blank=1
        line=${line#"${line%%[![:blank:]]*}"}
        line=${line#"$w"}
        if ((i >= 2)) && [[ -z $blank ]] && [[ $w =~ $sep || ${COMP_WORDS[i-1]} =~ $sep ]]; then
            words[${#words[@]}-1]+=$w
        else
            words+=("$w")
        fi
        ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
    done
    cur=${words[cword]-}
    prev=
    ((cword > 0)) && prev=${words[cword-1]}
    return 0
}
`

// bashWithoutPackage makes root's `completion bash` print cobra's script
// with bashInitCompletion, and its help say that no package is needed.
func bashWithoutPackage(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	bash, _, err := root.Find([]string{"completion", "bash"})
	if err != nil || bash.Name() != "bash" {
		return
	}
	bash.Long = strings.Replace(bash.Long, `This script depends on the 'bash-completion' package.
If it is not installed already, you can install it via your OS's package manager.`,
		`The script works without the bash-completion package, and uses it when it is loaded.`, 1)
	bash.RunE = func(c *cobra.Command, _ []string) error {
		noDesc, _ := c.Flags().GetBool("no-descriptions")
		out := c.OutOrStdout()
		if err := root.GenBashCompletionV2(out, !noDesc); err != nil {
			return err
		}
		_, err := io.WriteString(out, strings.ReplaceAll(bashInitCompletion, "PROG", root.Name()))
		return err
	}
}
