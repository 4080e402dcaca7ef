# bash complete.bash SCRIPT 'LINE': the words bash's programmable completion offers for LINE
# (its last word, empty after a trailing space), one per line, as a TAB at the end would.
set -u
source "$1" || exit 3
read -r -a COMP_WORDS <<<"$2"
[[ "$2" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="$2"
COMP_POINT=${#COMP_LINE}
# the function `complete -F` registered for the program
spec=$(complete -p "${COMP_WORDS[0]}") || exit 4
function=$(sed -n 's/.* -F \([^ ]*\) .*/\1/p' <<<"$spec")
prev=""
((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
COMPREPLY=()
"$function" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "$prev"
printf '%s\n' "${COMPREPLY[@]}"
