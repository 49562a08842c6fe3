// Command chart-readme writes the parameter table of the Helm chart's README from the
// comments in its values.yaml, between the README's two marker lines. `make
// chart-readme` runs it; a test (main_test.go, part of `make test`) fails when the
// committed README differs from what it would write.
//
// The comment convention is helm-docs': a comment block whose first line starts with
// `# -- ` describes the key right below it, and the `#` lines after it continue the
// description. Comment lines above the `# --` line are for the file's readers only.
// Every leaf (scalar, list, empty map) gets a row; a map gets one only when it has
// a description.
//
//	go run ./hack/chart-readme            rewrite the README's table
//	go run ./hack/chart-readme -check     exit 1 if the README is not current
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/agentenv/watchdog/internal/markdown"
)

// The README's table lives between these two lines.
const (
	beginMarker = "<!-- values:begin: generated from values.yaml by `make chart-readme`; edit values.yaml, not this table -->"
	endMarker   = "<!-- values:end -->"
)

func main() {
	chart := flag.String("chart", "charts/agentenv-scheduler-watchdog", "chart directory (values.yaml, README.md)")
	check := flag.Bool("check", false, "do not write: exit 1 if README.md is not what values.yaml generates")
	flag.Parse()
	readme := filepath.Join(*chart, "README.md")
	current, want, err := generate(*chart)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart-readme:", err)
		os.Exit(1)
	}
	if *check {
		if !bytes.Equal(current, want) {
			fmt.Fprintf(os.Stderr, "chart-readme: %s is not current with values.yaml: run `make chart-readme`\n", readme)
			os.Exit(1)
		}
		return
	}
	if bytes.Equal(current, want) {
		return
	}
	if err := os.WriteFile(readme, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "chart-readme:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "chart-readme: wrote", readme)
}

// generate returns the chart's README as it is and as it should be.
func generate(chartDir string) (current, want []byte, err error) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return nil, nil, err
	}
	current, err = os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		return nil, nil, err
	}
	rows, err := parseValues(values)
	if err != nil {
		return nil, nil, fmt.Errorf("values.yaml: %w", err)
	}
	want, err = markdown.Replace(current, beginMarker, endMarker, table(rows))
	return current, want, err
}

// row is one documented value.
type row struct {
	Key, Type, Default, Description string
}

// parseValues lists the values in file order.
func parseValues(src []byte) ([]row, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a mapping")
	}
	var rows []row
	if err := walk(doc.Content[0], "", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

func walk(m *yaml.Node, prefix string, rows *[]row) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		if prefix != "" {
			key = prefix + "." + k.Value
		}
		desc := description(k.HeadComment)
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			if desc != "" {
				*rows = append(*rows, row{Key: key, Type: "object", Description: desc})
			}
			if err := walk(v, key, rows); err != nil {
				return err
			}
			continue
		}
		def, typ, err := render(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*rows = append(*rows, row{Key: key, Type: typ, Default: def, Description: desc})
	}
	return nil
}

// description is the `# -- ` part of a head comment, its lines joined.
func description(comment string) string {
	var parts []string
	found := false
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(line)
		if !found {
			if rest, ok := strings.CutPrefix(line, "# --"); ok && (rest == "" || rest[0] == ' ') {
				found = true
				parts = append(parts, strings.TrimSpace(rest))
			}
			continue
		}
		if line == "" || !strings.HasPrefix(line, "#") {
			break // a blank line ends the block
		}
		parts = append(parts, strings.TrimSpace(strings.TrimPrefix(line, "#")))
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

// render is a value's default as compact JSON, and its type.
func render(v *yaml.Node) (string, string, error) {
	var x any
	if err := v.Decode(&x); err != nil {
		return "", "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return "", "", err
	}
	typ := "object"
	switch x.(type) {
	case nil:
		typ = "null"
	case string:
		typ = "string"
	case bool:
		typ = "bool"
	case int, int64, uint64:
		typ = "int"
	case float64:
		typ = "float"
	case []any:
		typ = "list"
	}
	return strings.TrimSpace(buf.String()), typ, nil
}

// table renders the rows as a Markdown table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n")
	for _, r := range rows {
		def := ""
		if r.Default != "" {
			def = markdown.Code(r.Default)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", markdown.Code(r.Key), r.Type, def, markdown.Cell(r.Description))
	}
	return b.String()
}
