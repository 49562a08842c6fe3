package state

import (
	"encoding/json"
	"fmt"
)

// migrate1to2 turns a version 1 document into version 2, as raw JSON, knowing only
// those two layouts: version 2 renamed each pod's open episode from "bad" to "episode".
// An error makes the document unreadable.
func migrate1to2(data []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if raw, ok := doc["pods"]; ok {
		var pods map[string]map[string]json.RawMessage
		if err := json.Unmarshal(raw, &pods); err != nil {
			return nil, fmt.Errorf("pods: %w", err)
		}
		for _, p := range pods { // a null pod stays null
			if bad, ok := p["bad"]; ok {
				p["episode"] = bad
				delete(p, "bad")
			}
		}
		b, err := json.Marshal(pods)
		if err != nil {
			return nil, err
		}
		doc["pods"] = b
	}
	doc["version"] = json.RawMessage("2")
	return json.Marshal(doc)
}
