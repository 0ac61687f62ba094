package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Consent answers a sign-in request at the local box base (its root URL)
// as a person at the consent page does, through the API the page's script
// calls (localbox/page): it signs in with the owner's code, then allows
// or denies (action "allow" or "deny") the authorize query, and returns
// the redirect the browser would follow. A status other than 200 is an
// error. Exported for the tests of package cli_test too.
func Consent(base, query, code, action string) (string, error) {
	post := func(path, sess string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Cocoonbox-Session", sess)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", path, resp.Status)
		}
		var m map[string]any
		return m, json.NewDecoder(resp.Body).Decode(&m)
	}
	verb, ok := map[string]string{"allow": "approve", "deny": "deny"}[action]
	if !ok {
		return "", fmt.Errorf("consent: action %q, want allow or deny", action)
	}
	m, err := post("/cb/api/session", "", map[string]string{"code": code})
	if err != nil {
		return "", err
	}
	sess, _ := m["session"].(string)
	if m, err = post("/cb/api/oauth/"+verb, sess, map[string]string{"query": query}); err != nil {
		return "", err
	}
	red, _ := m["redirect"].(string)
	return red, nil
}
