package engine

import "testing"

// The answers that say a response is not at a provider, and some that
// look alike but do not.
func TestDiscoverMissingShapes(t *testing.T) {
	d := &discovery{key: discoveryKey{id: "resp_42"}}
	cases := []struct {
		status int
		body   string
		want   bool
	}{
		{404, `{"error":{"message":"Previous response with id 'resp_42' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, true},
		{400, `{"error":{"message":"Previous response with id 'resp_42' not found.","type":"invalid_request_error","code":"previous_response_not_found"}}`, true},
		{404, `{"error":{"message":"Response with id 'resp_42' not found.","type":"invalid_request_error","param":null,"code":null}}`, true},
		{404, `{"error":{"message":"The model 'gpt-x' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, false},
		{404, `{"error":{"message":"Response with id 'resp_42' not found.","type":"server_error"}}`, false},
		{400, `{"error":{"message":"Response with id 'resp_42' not found.","type":"invalid_request_error"}}`, false},
		{500, `{"error":{"code":"previous_response_not_found"}}`, false},
		{404, `not json`, false},
	}
	for _, tc := range cases {
		if got := d.missing(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("%d %s: missing = %v, want %v", tc.status, tc.body, got, tc.want)
		}
	}
}
