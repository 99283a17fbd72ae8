package raftmeta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestBatchRoundTrip(t *testing.T) {
	msgs := []*pb.Message{
		{Type: pb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)), Entries: []*pb.Entry{ent(5, 2)}},
		{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(3)), Commit: new(uint64(9))},
	}
	b, err := encodeBatch(msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBatch(b)
	if err != nil || len(got) != 2 || !proto.Equal(got[0], msgs[0]) || !proto.Equal(got[1], msgs[1]) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := decodeBatch(b[:len(b)-1]); err == nil {
		t.Fatal("truncated batch accepted")
	}
}

func FuzzDecodeBatch(f *testing.F) {
	b, _ := encodeBatch([]*pb.Message{{Type: pb.MsgApp.Enum(), To: new(uint64(2)), Entries: []*pb.Entry{ent(1, 1)}}})
	f.Add(b)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeBatch(b) // must not panic
		_, _ = readSnapshotMessage(bufio.NewReader(bytes.NewReader(b)))
	})
}

func TestSnapshotMessageFraming(t *testing.T) {
	m := &pb.Message{Type: pb.MsgSnap.Enum(), To: new(uint64(2)), Snapshot: &pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{Index: new(uint64(7)), Term: new(uint64(2))}}}
	hb, _ := proto.Marshal(m)
	body := append(binary.AppendUvarint(nil, uint64(len(hb))), hb...)
	body = append(body, []byte("snapshot-bytes")...)
	got, err := readSnapshotMessage(bufio.NewReader(bytes.NewReader(body)))
	if err != nil || string(got.GetSnapshot().GetData()) != "snapshot-bytes" || got.GetSnapshot().GetMetadata().GetIndex() != 7 {
		t.Fatalf("got %v, %v", got, err)
	}
	other, _ := proto.Marshal(&pb.Message{Type: pb.MsgApp.Enum()})
	if _, err := readSnapshotMessage(bufio.NewReader(bytes.NewReader(append(binary.AppendUvarint(nil, uint64(len(other))), other...)))); err == nil {
		t.Fatal("non-snapshot message accepted on the snapshot endpoint")
	}
}
