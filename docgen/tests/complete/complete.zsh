# zsh -f complete.zsh FPATH_DIR 'LINE': the words zsh's completion system offers for LINE, one
# per line. An interactive zsh on a pseudo-terminal (zpty) runs compinit with FPATH_DIR first
# in $fpath; LINE is typed, then a TAB; compadd is wrapped to print what each completer adds.
zmodload zsh/zpty || exit 3
zpty shell zsh -f -i
zpty -w shell "PS1= RPS1=; unsetopt beep; fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D"
# the markers are split in what is typed so that the echo of these lines never matches them
zpty -w shell 'compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a added; builtin compadd -A added "$@"
  local w; for w in $added; do print -r -- "<wo""rd>$w</wo""rd>"; done
  builtin compadd "$@"
}'
zpty -w shell 'completion_done() { print -r -- "<completion-do""ne/>"; }; comppostfuncs=(completion_done)'
zpty -w shell 'zstyle ":completion:*" menu no'
zpty -n -w shell "$2"$'\t'
typeset out
zpty -r -m shell out '*<completion-done/>*' || { print -u2 "zsh: no completion for: $2"; exit 4; }
zpty -d shell
print -r -- "$out" | grep -ao '<word>[^<]*</word>' | sed 's/<\/\{0,1\}word>//g'
