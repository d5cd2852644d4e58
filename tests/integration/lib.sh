# Shared by the integration tests: source it, then use
#   expect WHAT COMMAND...   counts and prints "ok: WHAT" or "FAIL: WHAT"
#   wait_for_line FILE PATTERN SECONDS   true once PATTERN is in FILE
#   wait_exit PID SECONDS    sets rc to PID's exit code, or "hung"
#   eventually SECONDS COMMAND...   true once COMMAND succeeds (tried every 0.2 s)
#   field FILE KEY           the last value of "KEY": in FILE (a JSON line's number or literal)
#   finish [LINES]           prints the counts (after a failure, first the last LINES of
#                            each log in $tmp) and exits, 0 only if nothing failed
# A scratch directory, and clusters of troupe-node processes ("$bin") in it:
#   enter_scratch_dir        makes $tmp, a new directory, the working directory (relative
#                            paths in configs, checkpoint.log-dir, land there); on exit kills
#                            the processes in pids, calls more_cleanup if the script defines
#                            it, and removes $tmp (TROUPE_KEEP_LOGS=1 keeps it, saying where)
#   cluster_config FILE PS WORKERS   writes FILE: a [cluster] section listing a chief, PS ps
#                            tasks and WORKERS workers on free ports of 127.0.0.1, then
#                            standard input (more [cluster] keys, the sections the test
#                            sets); sets chief_addr and ps_addr as read_cluster does
#   move_to_free_ports FILE  the same for a config there is: each port of 127.0.0.1 in FILE
#                            moved to a free one
#   example_config EXAMPLE FILE [KEY=VALUE...]   $root/config/examples/EXAMPLE.conf as FILE,
#                            on free ports, each KEY (one the file sets) set to VALUE
#   read_cluster FILE        sets chief_addr and ps_addr (an array) from FILE's [cluster]
#   tf_config FILE JOB INDEX the TF_CONFIG of task JOB:INDEX of FILE's cluster
#   train_section [KEY=VALUE...]   a [train] section: the suite's short Adam run (model "mlp",
#                            optimizer "adam", learning-rate 0.001, log-interval 500), each
#                            KEY set to VALUE as the file writes it (strings quoted), in place
#                            of its default or added after them
#   sklearn_data SET         the [data] section of scripts/convert-sklearn-data's SET (digits,
#                            iris, diabetes) converted into sk/
#   start_task NAME FILE JOB INDEX [FLAG...]   "$bin" as JOB:INDEX of config FILE in the
#                            background (prefixed by the command in the array launch, if
#                            any), its output in NAME.log, its pid in pid[NAME] and pids
#   start_cluster FILE [PREFIX [FLAG...]]   start_task for each task FILE lists: PREFIXps0..,
#                            PREFIXchief, PREFIXw0..
#   expect_exit CODE SECONDS NAME...   waits up to SECONDS for each task NAME and expects
#                            exit CODE ("non-zero": any code but 0, in time)
#   wait_tasks SECONDS NAME...   waits up to SECONDS for each task NAME; sets exits to
#                            "NAME:CODE ..." (CODE hung: still running); true if all exited 0
fails=0; passes=0
expect() { local what=$1; shift
  if "$@"; then echo "ok: $what"; passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi; }
wait_for_line() { local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
wait_exit() { local end=$((SECONDS + $2)); rc=hung
  while kill -0 "$1" 2>/dev/null; do [ $SECONDS -ge $end ] && return; sleep 0.2; done
  wait "$1"; rc=$?; }
eventually() { local end=$((SECONDS + $1)); shift
  while [ $SECONDS -lt $end ]; do "$@" && return 0; sleep 0.2; done; "$@"; }
field() { grep -o "\"$2\":[^,}]*" "$1" | tail -1 | cut -d: -f2; }
finish() { local f
  if [ "$fails" -ne 0 ] && [ -n "${1:-}" ]; then
    for f in "$tmp"/*.log; do echo "== $f"; tail -n "$1" "$f"; done
  fi
  echo "$(basename "$0" .sh): $passes passed, $fails failed"
  [ "$fails" -eq 0 ]; exit; }

pids=(); declare -A pid=(); launch=()
enter_scratch_dir() { tmp=$(mktemp -d) && cd "$tmp" || exit 1; trap leave_scratch_dir EXIT; }
leave_scratch_dir() { local task # not p: the namespace tests' prefix, more_cleanup's
  for task in "${pids[@]}"; do kill -CONT "$task"; kill -9 "$task"; done 2>/dev/null
  if declare -F more_cleanup >/dev/null; then more_cleanup; fi
  if [ -n "${TROUPE_KEEP_LOGS:-}" ]; then echo "logs in $tmp"; else rm -rf "$tmp"; fi; }

# N ports of 127.0.0.1, below the kernel's ephemeral range, that take no connection.
free_ports() { local -A chosen=(); local port
  while [ ${#chosen[@]} -lt "$1" ]; do port=$((20000 + ${SRANDOM:-$RANDOM} % 12000))
    [ -z "${chosen[$port]:-}" ] && ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && chosen[$port]=1
  done
  echo "${!chosen[@]}"; }
cluster_config() { local file=$1 ports lists=() job n
  ports=($(free_ports $((1 + $2 + $3))))
  for job in chief:1 ps:$2 worker:$3; do n=${job#*:}
    lists+=("${job%:*} = [$(printf '"127.0.0.1:%s", ' "${ports[@]:0:n}" | sed 's/, $//')]")
    ports=("${ports[@]:n}")
  done
  { echo "[cluster]"; printf '%s\n' "${lists[@]}"; cat; } >"$file"
  read_cluster "$file"; }
move_to_free_ports() { local old new i
  old=($(grep -o '127\.0\.0\.1:[0-9]*' "$1" | cut -d: -f2 | sort -u)); new=($(free_ports ${#old[@]}))
  for i in "${!old[@]}"; do sed -i "s/127\.0\.0\.1:${old[i]}\b/127.0.0.1:#${new[i]}/g" "$1"; done
  sed -i 's/127\.0\.0\.1:#/127.0.0.1:/g' "$1"
  read_cluster "$1"; }
example_config() { local example="$root/config/examples/$1.conf" file=$2 setting key; shift 2
  cp "$example" "$file" || exit 1
  for setting; do key=${setting%%=*}
    grep -q "^$key = " "$file" || { echo "example_config: $example sets no $key" >&2; exit 1; }
    sed -i "s|^$key = .*|$key = ${setting#*=}|" "$file"
  done
  move_to_free_ports "$file"; }
# The list KEY of FILE's [cluster] section as written there (a JSON array), and its entries.
cluster_list() { awk -v key="$2" '/^\[/ { in_cluster = ($0 == "[cluster]") }
  in_cluster && $1 == key { sub(/^[^=]*=[ \t]*/, ""); sub(/[ \t]*;.*/, ""); print }' "$1"; }
cluster_entries() { cluster_list "$1" "$2" | grep -o '"[^"]*"' | tr -d '"'; }
read_cluster() { chief_addr=$(cluster_entries "$1" chief); mapfile -t ps_addr < <(cluster_entries "$1" ps); }
tf_config() {
  printf '{"cluster": {"chief": %s, "ps": %s, "worker": %s}, "task": {"type": "%s", "index": %s}}\n' \
    "$(cluster_list "$1" chief)" "$(cluster_list "$1" ps)" "$(cluster_list "$1" worker)" "$2" "$3"; }
train_section() { local keys=(model optimizer learning-rate log-interval) setting key
  local -A value=([model]='"mlp"' [optimizer]='"adam"' [learning-rate]=0.001 [log-interval]=500)
  for setting; do key=${setting%%=*}
    [ -n "${value[$key]+set}" ] || keys+=("$key")
    value[$key]=${setting#*=}
  done
  echo "[train]"; for key in "${keys[@]}"; do echo "$key = ${value[$key]}"; done; }
sklearn_data() { printf '[data]\ntrain = ["sk/%s-train.csv"]\ntest = ["sk/%s-test.csv"]\n' "$1" "$1"
  case $1 in
    digits) printf 'label-column = "digit"\nnormalize = "scale"\nscale = 0.0625\n' ;;
    iris) printf 'label-column = "species"\nnormalize = "standardize"\n' ;;
    diabetes) printf 'label-column = "progression"\ntask = "regression"\nnormalize = "standardize"\n' ;;
  esac; }

start_task() { local name=$1 file=$2 job=$3 index=$4; shift 4
  "${launch[@]}" "$bin" --config-file="$file" --job_name="$job" --task_index="$index" "$@" >"$name.log" 2>&1 &
  pid[$name]=$!; pids+=($!); }
start_cluster() { local file=$1 prefix=${2:-} i n_ps n_workers; shift $(($# < 2 ? $# : 2))
  n_ps=$(cluster_entries "$file" ps | wc -l); n_workers=$(cluster_entries "$file" worker | wc -l)
  for ((i = 0; i < n_ps; i++)); do start_task "${prefix}ps$i" "$file" ps "$i" "$@"; done
  start_task "${prefix}chief" "$file" chief 0 "$@"
  for ((i = 0; i < n_workers; i++)); do start_task "${prefix}w$i" "$file" worker "$i" "$@"; done; }
expect_exit() { local want=$1 secs=$2 name; shift 2
  for name; do wait_exit "${pid[$name]}" "$secs"
    expect "$name exits $want within $secs s (got $rc)" exited "$want"; done; }
exited() { if [ "$1" = non-zero ]; then [ "$rc" != 0 ] && [ "$rc" != hung ]; else [ "$rc" = "$1" ]; fi; }
wait_tasks() { local secs=$1 name all=0; shift; exits=""
  for name; do wait_exit "${pid[$name]}" "$secs"; exits+="${exits:+ }$name:$rc"; [ "$rc" = 0 ] || all=1; done
  return $all; }
