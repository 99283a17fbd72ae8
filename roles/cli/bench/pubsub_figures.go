package bench

import "time"

// pubsubMeasure is what a pub/sub run counted, and when.
type pubsubMeasure struct {
	start        time.Time // the first publish
	pubEnd       time.Time // the publisher finished (Finish returned)
	lastDelivery time.Time // the latest payload the subscriber received; zero if none
	// published counts payloads the broker took: acknowledged with
	// --acked, else handed to the client and flushed by Finish.
	// delivered counts payloads the subscriber received.
	published, delivered, deliveredBytes int64
	payload                              int
	publishErrors                        int64 // publish calls that failed
}

// interval is what every rate is measured over: from the first publish
// until the later of the publisher finishing and the last delivery. The
// wait for stragglers after the last delivery is not in it, and the
// publish and delivery rates share it, so published / measured_s is
// published_msgs_per_s and the two rates compare directly.
func (m pubsubMeasure) interval() time.Duration {
	end := m.pubEnd
	if m.lastDelivery.After(end) {
		end = m.lastDelivery
	}
	return max(end.Sub(m.start), time.Microsecond)
}

// addTo adds the figures, counts first, then the rates over interval.
func (m pubsubMeasure) addTo(r *result) {
	secs := m.interval().Seconds()
	r.add("measured_s", secs, "s")
	r.add("published", float64(m.published), "msgs")
	r.add("delivered", float64(m.delivered), "msgs")
	r.add("lost", float64(m.published-m.delivered), "msgs")
	r.add("publish_errors", float64(m.publishErrors), "calls")
	r.add("published_msgs_per_s", float64(m.published)/secs, "msg/s")
	r.add("delivered_msgs_per_s", float64(m.delivered)/secs, "msg/s")
	r.add("published_mb_per_s", float64(m.published)*float64(m.payload)/secs/1e6, "MB/s")
	r.add("delivered_mb_per_s", float64(m.deliveredBytes)/secs/1e6, "MB/s")
}
