# bash completion of spanprobe and spanprobe-f64 (installed by `make install`): the commands, then
# each command's options as its own --help lists them, else file names.
_spanprobe() {
    local cur=${COMP_WORDS[COMP_CWORD]} words
    if [ "$COMP_CWORD" -eq 1 ]; then
        words=$("${COMP_WORDS[0]}" --help 2>/dev/null | sed -n 's/^  \([a-z][a-z0-9-]*\)  .*/\1/p')
    elif [[ $cur == -* ]]; then
        words=$("${COMP_WORDS[0]}" "${COMP_WORDS[1]}" --help 2>/dev/null | grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u)
    else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return
    fi
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
}
complete -o filenames -F _spanprobe spanprobe spanprobe-f64
