package sim

import (
	"strings"
	"unicode"
)

// splitText cuts text into n deltas by words. Their concatenation is the
// response text: text itself when it has at least n words, otherwise text
// repeated (joined by a space) and cut after the n-th word, with no
// whitespace after it.
func splitText(text string, n int) []string {
	words := words(text)
	out := make([]string, n)
	if n <= len(words) {
		for i := range n {
			out[i] = strings.Join(words[i*len(words)/n:(i+1)*len(words)/n], "")
		}
		return out
	}
	for i := range n {
		w := words[i%len(words)]
		if i%len(words) == len(words)-1 && i < n-1 && !endsInSpace(w) {
			w += " "
		}
		out[i] = w
	}
	out[n-1] = strings.TrimRightFunc(out[n-1], unicode.IsSpace)
	return out
}

// words cuts text before every word but the first, so each piece is a word
// with the whitespace after it and the pieces join back into text.
func words(text string) []string {
	var out []string
	start, seenWord, prevSpace := 0, false, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && seenWord && prevSpace {
			out = append(out, text[start:i])
			start = i
		}
		seenWord = seenWord || !space
		prevSpace = space
	}
	return append(out, text[start:])
}

func endsInSpace(s string) bool {
	return strings.TrimRightFunc(s, unicode.IsSpace) != s
}
