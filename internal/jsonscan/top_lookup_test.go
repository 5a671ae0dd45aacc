package jsonscan

import "testing"

// Top.Lookup reads what Lookup reads, from the index or without one.
func TestTopLookupAgreesWithLookup(t *testing.T) {
	bodies := []string{
		`{"model":"m","n":2,"stream_options":{"include_usage":true}}`,
		`{"n":1,"n":3,"stream_options":{"include_usage":false,"include_usage":true}}`,
		`{"\u006e":5,"stream_options":{"incl\u0075de_usage":true}}`,
		`{"messages":[{"n":9}],"stream_options":null}`,
		`{"model":"m"}`,
	}
	paths := [][]string{{"n"}, {"stream_options", "include_usage"}, {"stream_options"}, {"missing"}, {}}
	for _, b := range bodies {
		body := []byte(b)
		var top Top
		if err := top.Index(body); err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			want, wok := Lookup(body, p...)
			got, ok := top.Lookup(body, p...)
			if string(got) != string(want) || ok != wok {
				t.Errorf("%s %v: index %q %v, walk %q %v", b, p, got, ok, want, wok)
			}
			var none Top
			if got, ok := none.Lookup(body, p...); string(got) != string(want) || ok != wok {
				t.Errorf("%s %v without an index: %q %v", b, p, got, ok)
			}
		}
	}
}
