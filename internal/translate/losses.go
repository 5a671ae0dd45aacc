package translate

// The losses of one request are a short list: each named once, in the
// order found, at most maxNamedLosses of them. A request may hold any
// number of distinct losses (80,000 unknown fields fill 1 MB): each
// compared with every one before it, the bookkeeping was quadratic (seconds
// of a core for 1 MB, minutes for 4 MB), and the names would fill the
// refusal message or the response header. Past the bound only what can
// still change the outcome is collected: a first material loss (one
// refuses the request, whatever follows), and a note, once per kind, that
// more were left unnamed. Each addLoss then compares with at most
// maxNamedLosses+3 losses: linear in the request.

const (
	// maxNamedLosses is how many losses a translation names.
	maxNamedLosses = 32
	// unnamedLosses stands for the losses past maxNamedLosses, last in
	// Describe's line.
	unnamedLosses = "and more"
)

// addLoss records a loss once. Names hold client input (a field, a block
// type), so they are clipped and kept to printable ASCII: they go into
// logs and a response header.
func addLoss(losses []Loss, what string, material bool) []Loss {
	if len(losses) >= maxNamedLosses && (!material || Material(losses)) {
		return noteUnnamed(losses, material)
	}
	what = printable(what, 100)
	for _, l := range losses {
		if l.What == what {
			return losses
		}
	}
	return append(losses, Loss{What: what, Material: material})
}

// noteUnnamed says, once per kind, that losses past the named ones were
// left out.
func noteUnnamed(losses []Loss, material bool) []Loss {
	for _, l := range losses[maxNamedLosses:] {
		if l.What == unnamedLosses && l.Material == material {
			return losses
		}
	}
	return append(losses, Loss{What: unnamedLosses, Material: material})
}

func printable(s string, limit int) string {
	b := []byte(s)
	if len(b) > limit {
		b = append(b[:limit:limit], "..."...)
	}
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

// stopSequenceLoss is the encoders' name for a matched stop sequence
// reported as a plain stop: a loss to Anthropic clients only, which can
// tell one; Chat and Gemini clients cannot (the pairs serving them drop it).
const stopSequenceLoss = "stop_sequence stop reason (reported as end_turn)"

// withoutLoss is losses without the one named what (a loss an encoder
// names for some clients that is none to this one).
func withoutLoss(losses []Loss, what string) []Loss {
	out := losses[:0:0]
	for _, l := range losses {
		if l.What != what {
			out = append(out, l)
		}
	}
	return out
}
