package metrics

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/ptr"
)

// Totals are the running totals of a CronJob run's pushed counters by series (a
// histogram's count, sum and buckets each one), so a pushed `_total` is a counter.
type Totals map[string]float64

// totalsDoc is Totals as stored.
type totalsDoc struct {
	Version int                `json:"version"`
	Series  map[string]float64 `json:"series"`
}

const totalsVersion = 1

// DecodeTotals reads stored totals; "" is none yet.
func DecodeTotals(raw string) (Totals, error) {
	if raw == "" {
		return Totals{}, nil
	}
	var d totalsDoc
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return nil, fmt.Errorf("running totals: %w", err)
	}
	if d.Version != totalsVersion {
		return nil, fmt.Errorf("running totals: version %d, this watchdog reads %d", d.Version, totalsVersion)
	}
	t := Totals{}
	for k, v := range d.Series {
		if v < 0 || v != v { // a counter never is; NaN is not equal to itself
			return nil, fmt.Errorf("running totals: %s = %v", k, v)
		}
		t[k] = v
	}
	return t, nil
}

// Encode is t as stored.
func (t Totals) Encode() (string, error) {
	b, err := json.Marshal(totalsDoc{Version: totalsVersion, Series: t})
	return string(b), err
}

// eachCounter calls f with the key and value of each counter and histogram count, sum and bucket.
func eachCounter(fams []*dto.MetricFamily, f func(key string, v *float64)) {
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			key := fam.GetName() + labelKey(m.GetLabel())
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				if c := m.GetCounter(); c != nil && c.Value != nil {
					f(key, c.Value)
				}
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				if h == nil {
					continue
				}
				count := float64(h.GetSampleCount())
				f(key+"_count", &count)
				h.SampleCount = ptr.To(uint64(count))
				sum := h.GetSampleSum()
				f(key+"_sum", &sum)
				h.SampleSum = &sum
				for _, b := range h.GetBucket() {
					n := float64(b.GetCumulativeCount())
					f(key+"_bucket{le="+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)+"}", &n)
					b.CumulativeCount = ptr.To(uint64(n))
				}
			}
		}
	}
}

// labelKey is a series' labels in a stable order, as {a="x",b="y"}.
func labelKey(labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return ""
	}
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
