# skipcount.awk - pass ctest's output through unchanged, and say how many
# tests were skipped (exit 77: a missing prerequisite) on a line of its own
# just before ctest's summary, which stays the last thing printed.  ctest
# itself lists skipped tests but counts them as passed.
/\*\*\*Skipped/ && !summary { skipped++ }
/tests passed, [0-9]+ tests? failed out of/ && !summary {
	summary = 1
	printf "%d tests skipped (a skip is a missing prerequisite, not a pass)\n\n", skipped
}
{ print; fflush() }
