package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// The bash and zsh scripts are urfave/cli's own (its autocomplete/
// directory, MIT licensed), with the program name filled in: they ask the
// binary itself for the words that fit (felix ... --generate-bash-completion),
// so they never go stale. fish gets a static script generated from the
// command tree (App.ToFishCompletion).
const bashCompletion = `# bash completion for %[1]s; load with: source <(%[1]s completion bash)
_%[1]s_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur prev opts words cword
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    else
      COMPREPLY=()
      _get_comp_words_by_ref -n "=:" cur prev words cword
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}
complete -o bashdefault -o default -o nospace -F _%[1]s_bash_autocomplete %[1]s
`

const zshCompletion = `#compdef %[1]s
# zsh completion for %[1]s; load with: source <(%[1]s completion zsh)
_%[1]s_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _%[1]s_zsh_autocomplete %[1]s
`

func completionCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		UsageText: "felix completion bash|zsh|fish",
		Description: "Prints a script that completes felix's commands and flags in your shell. bash and zsh\n" +
			"ask felix itself for the words that fit, so the script never goes stale; fish gets the\n" +
			"command tree written out. Examples:\n\n" +
			"   source <(felix completion bash)        # in ~/.bashrc\n" +
			"   source <(felix completion zsh)         # in ~/.zshrc, after compinit\n" +
			"   felix completion fish > ~/.config/fish/completions/felix.fish",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1); err != nil {
				return err
			}
			script, err := completionScript(c.App, c.Args().First())
			if err != nil {
				return usageErrorf(c, "%v", err)
			}
			_, err = fmt.Fprint(c.App.Writer, script)
			return err
		},
	})
}

// completionScript is the completion script of app for shell.
func completionScript(app *cli.App, shell string) (string, error) {
	switch shell {
	case "bash":
		return fmt.Sprintf(bashCompletion, app.Name), nil
	case "zsh":
		return fmt.Sprintf(zshCompletion, app.Name), nil
	case "fish":
		s, err := app.ToFishCompletion()
		if err != nil {
			return "", fmt.Errorf("fish completion: %w", err)
		}
		return s, nil
	}
	return "", fmt.Errorf("unknown shell %q (use %s)", shell, strings.Join([]string{"bash", "zsh", "fish"}, ", "))
}
