# fish completion for monctl(1). monctl itself says what may come next (`monctl __complete
# WORD...`): its commands, options, and the values of some (event names and standing sessions
# from the running daemon, units, CPUs).
function __monctl_complete
    set -l tokens (commandline -opc) (commandline -ct)
    set -l out ($tokens[1] __complete $tokens[2..-1] 2>/dev/null)
    if test "$out" = ":files"
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $out
    end
end
complete -c monctl -f -a '(__monctl_complete)'
