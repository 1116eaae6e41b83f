# Flattens JSON (stdin) into one line per value: PATH=VALUE, e.g.
#   items.0.metadata.name=web-vm
#   items.0.status.containerStatuses.0.restartCount=0
#   items.0.spec.volumes=[]
# Keys and array indexes are joined with "."; strings lose their quotes and have \" \\ \/
# unescaped (other escapes are kept as written); empty objects/arrays print as {} / [].
# The guest has no jq; this runs under busybox awk (and gawk/mawk on the host).
#
# Tokenises line by line: JSON strings cannot hold raw newlines, so a token never spans
# lines, and podhost's pretty-printed output keeps every line short.

function path(   p, l) {
    p = ""
    for (l = 1; l <= d; l++) p = p (l > 1 ? "." : "") (type[l] == "a" ? idx[l] : key[l])
    return p
}
function value_starts() { if (d > 0) n[d]++ }
function emit(v) {
    value_starts()
    print path() "=" v
}
function push(t) {
    value_starts()
    d++
    type[d] = t
    n[d] = 0
    idx[d] = 0
    key[d] = ""
    want_key[d] = (t == "o")
}
function pop(   t, cnt) {
    t = type[d]
    cnt = n[d]
    d--
    # an empty container is a value of its parent: print it at the parent's current path
    if (cnt == 0) print path() "=" (t == "a" ? "[]" : "{}")
}
function unescape(s) {
    s = substr(s, 2, length(s) - 2)
    gsub(/\\\\/, "\001", s)
    gsub(/\\"/, "\"", s)
    gsub(/\\\//, "/", s)
    gsub(/\001/, "\\", s)
    return s
}

BEGIN { d = 0 }
{
    line = $0
    while (length(line) > 0) {
        if (match(line, /^[ \t\r]+/)) { line = substr(line, RLENGTH + 1); continue }
        c = substr(line, 1, 1)
        if (c == "{") { push("o"); line = substr(line, 2); continue }
        if (c == "[") { push("a"); line = substr(line, 2); continue }
        if (c == "}" || c == "]") { pop(); line = substr(line, 2); continue }
        if (c == ",") {
            if (type[d] == "a") idx[d]++
            else want_key[d] = 1
            line = substr(line, 2)
            continue
        }
        if (c == ":") { want_key[d] = 0; line = substr(line, 2); continue }
        if (c == "\"") {
            if (!match(line, /^"([^"\\]|\\.)*"/)) { print "json.awk: unterminated string: " line > "/dev/stderr"; exit 1 }
            tok = unescape(substr(line, 1, RLENGTH))
            line = substr(line, RLENGTH + 1)
            if (d > 0 && type[d] == "o" && want_key[d]) key[d] = tok
            else emit(tok)
            continue
        }
        if (match(line, /^[-+0-9.eEa-z]+/)) {
            emit(substr(line, 1, RLENGTH))
            line = substr(line, RLENGTH + 1)
            continue
        }
        print "json.awk: unexpected input: " line > "/dev/stderr"
        exit 1
    }
}
