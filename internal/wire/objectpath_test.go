package wire

import (
	"slices"
	"testing"
)

// A path reaches only the members it names, through arrays and filters.
func TestObjectPath(t *testing.T) {
	rules := []ObjectRule{{Marker: []byte(`"id"`), Kind: ObjectFile, Paths: []ObjectPath{Path("a[]{type=x|y}.b.ids[]"), Path("top")}, ID: StringOrID}}
	body := []byte(`{"top":{"id":"t1"},"a":[{"type":"x","b":{"ids":["i1","i2"]}},{"type":"z","b":{"ids":["no"]}},{"b":{"ids":["no2"]}},{"type":"y","b":{"ids":"no3"}},{"type":"y","b":{"ids":["i3"]}}],"deep":{"top":"no4"}}`)
	var buf [8]ObjectRef
	got := NamedObjects(rules, body, buf[:0])
	want := []ObjectRef{{ObjectFile, "i1"}, {ObjectFile, "i2"}, {ObjectFile, "i3"}, {ObjectFile, "t1"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := NamedObjects(rules, body, buf[:0:2]); len(got) != 2 {
		t.Fatalf("cap 2: got %v", got)
	}
	for _, bad := range []string{"", "a..b", "a{type}", "a[", "{type=x}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Path(%q) did not panic", bad)
				}
			}()
			Path(bad)
		}()
	}
}

func TestResourceName(t *testing.T) {
	for v, want := range map[string]string{
		`"files/abc"`:           "abc",
		`"files/a/b"`:           "",
		`"https://x/files/abc"`: "",
		`"cachedContents/abc"`:  "",
		`{"name":"files/abc"}`:  "",
		`"files/"`:              "",
	} {
		if got := ResourceName([]byte(v), "files/"); got != want {
			t.Errorf("%s: got %q, want %q", v, got, want)
		}
	}
}
