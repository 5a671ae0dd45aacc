package jsonscan

// Words a validating walk watches for: the strings (keys and values, at
// any depth) that tell a reader its member may be in the body, noted as
// the walk passes them, so the reader needs no search of its own. A
// provider-held object's marker ("file_id", "code_interpreter") is the
// use: searching an agent's body of hundreds of kilobytes once per marker
// cost more than the walk itself.

// Words is a set of up to 64 JSON strings, raw (quotes included, as
// written: an escaped spelling is another string), shorter than 64 bytes.
type Words struct {
	words [][]byte
	lens  uint64 // bit n: some word is n bytes long
}

// NewWords makes the set of words; it panics past 64 words or on a word
// of 64 bytes or more (they are the program's constants).
func NewWords(words ...[]byte) *Words {
	if len(words) > 64 {
		panic("jsonscan: more than 64 watched words")
	}
	w := &Words{words: words}
	for _, s := range words {
		if len(s) >= 64 {
			panic("jsonscan: a watched word of 64 bytes or more")
		}
		w.lens |= 1 << len(s)
	}
	return w
}

// Watch is what one walk saw of its Words.
type Watch struct {
	Words *Words
	seen  uint64 // bit k: Words.words[k] occurred
}

// note records the raw string s when it is one of the words.
func (w *Watch) note(s []byte) {
	if len(s) >= 64 || w.Words.lens&(1<<len(s)) == 0 {
		return
	}
	for k, word := range w.Words.words {
		if string(word) == string(s) {
			w.seen |= 1 << k
		}
	}
}

// Saw reports whether the walk passed word as a whole string (known), or
// that the watch cannot tell (word is not one of its words, or there was
// no watch): then the caller searches.
func (w *Watch) Saw(word []byte) (seen, known bool) {
	if w == nil || w.Words == nil {
		return false, false
	}
	for k, s := range w.Words.words {
		if string(s) == string(word) {
			return w.seen&(1<<k) != 0, true
		}
	}
	return false, false
}

// Watch makes the walk of it (and of the containers it enters) note the
// watched words in every key and string value it passes.
func (it *Iter) Watch(w *Watch) { it.watch = w }

// Marked is the parse's watch of body when t indexes it (see Holds).
func (t *Top) Marked(body []byte) *Watch {
	if !t.Holds(body) {
		return nil
	}
	return &t.Marks
}
