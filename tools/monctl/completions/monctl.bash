# bash completion for monctl(1). monctl itself says what may come next (`monctl __complete
# WORD...`): its commands, options, and the values of some (event names and standing sessions
# from the running daemon, units, CPUs).
_monctl() {
    # The words up to the cursor as the command line has them: bash's own words are split at
    # ':' and '=' as well (COMP_WORDBREAKS), and event names have "::".
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -ra words <<<"$line"
    [[ $line =~ [[:space:]]$ ]] && words+=("")
    ((${#words[@]} >= 2)) || return
    local cur=${words[-1]}
    local out
    out=$("${words[0]}" __complete "${words[@]:1}" 2>/dev/null) || return
    local IFS=$'\n'
    if [[ $out == ":files" ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
        compopt -o filenames 2>/dev/null
        return
    fi
    COMPREPLY=($(compgen -W "$out" -- "$cur"))
    # What bash replaces is its own last word: the part after the last ':' or '='.
    local word=${COMP_WORDS[COMP_CWORD]}
    [[ $word =~ ^[:=]+$ ]] && word=""
    local drop=${cur:0:${#cur}-${#word}}
    if [[ -n $drop ]]; then
        COMPREPLY=("${COMPREPLY[@]#"$drop"}")
    fi
}
complete -F _monctl monctl
