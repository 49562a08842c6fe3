package state

import (
	"encoding/json"
	"fmt"
)

// migrations[v] turns a version v document into version v+1, as raw JSON: each step
// knows only the two layouts it joins. An error makes the document unreadable.
var migrations = map[int]func([]byte) ([]byte, error){
	1: migrate1to2,
}

// migrate1to2: version 2 renamed each pod's open episode from "bad" to "episode".
func migrate1to2(data []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if raw, ok := doc["pods"]; ok && string(raw) != "null" {
		var pods map[string]map[string]json.RawMessage
		if err := json.Unmarshal(raw, &pods); err != nil {
			return nil, fmt.Errorf("pods: %w", err)
		}
		for _, p := range pods {
			if p == nil {
				continue
			}
			if bad, ok := p["bad"]; ok {
				if _, both := p["episode"]; both {
					return nil, fmt.Errorf("a pod has both \"bad\" and \"episode\"")
				}
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
