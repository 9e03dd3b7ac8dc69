# Prints what zsh's completion shows for the words in $1, with the completion function in
# the folder $2, from an interactive zsh driven through zpty (the way a user's Tab is):
#   zsh -f zsh_complete.zsh 'ddprun --rdzv-backend ' DIR
# The keys are sent once the line editor shows the new prompt (before that, the terminal
# is not yet in the editor's mode and a Tab would be taken as text): Tab twice (the list,
# then the first candidate), Ctrl-U, then a marker to read up to.
zmodload zsh/zpty
zpty z zsh -f -i
# The prompt is written split in the command, so that its echo cannot match it.
zpty -w z "fpath=($2 \$fpath); autoload -U compinit; compinit -u -D; LISTMAX=100000; zstyle ':completion:*' list-prompt ''; unsetopt BEEP; PS1='RE''ADY>'"
zpty -r -m z out '*READY>*'
zpty -w -n z "$1"$'\t'$'\t'$'\025'
zpty -w z "print -r -- DO""NE"
zpty -r -m z out '*DONE*'
print -r -- "$out"
zpty -d z
