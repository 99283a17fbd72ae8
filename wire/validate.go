package wire

// Validator is implemented by requests whose required fields can be checked
// without any broker state.
type Validator interface {
	Validate() error
}

func requireNames(kind string, fields ...[2]string) error {
	for _, f := range fields {
		if f[1] == "" {
			return NewError(CodeInvalidRequest, "%s: missing field %s", kind, f[0])
		}
	}
	return nil
}

func validAck(a AckMode) error {
	switch a {
	case "", AckNone, AckPerMessage, AckPerBatch:
		return nil
	}
	return NewError(CodeInvalidRequest, "unknown ack mode %q", a)
}

// validShardOrKey refuses a publish that both names a shard and carries a
// routing key: the two would pick the shard twice.
func validShardOrKey(kind string, shard *uint32, key []byte) error {
	if shard != nil && len(key) > 0 {
		return NewError(CodeInvalidRequest, "%s: shard and key are exclusive", kind)
	}
	return nil
}

// Validate checks the required fields of an auth.
func (m *Auth) Validate() error {
	return requireNames("auth", [2]string{"tenant_id", m.TenantID}, [2]string{"token", m.Token})
}

// Validate checks the required fields of a publish.
func (m *Publish) Validate() error {
	if err := requireNames("publish", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	if m.Payload == nil {
		return NewError(CodeInvalidRequest, "publish: missing field payload")
	}
	if err := validShardOrKey("publish", m.Shard, m.Key); err != nil {
		return err
	}
	return validAck(m.Ack)
}

// Validate checks the required fields of a publish_batch.
func (m *PublishBatch) Validate() error {
	if err := requireNames("publish_batch", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream}); err != nil {
		return err
	}
	if m.Payloads == nil {
		return NewError(CodeInvalidRequest, "publish_batch: missing field payloads")
	}
	if err := validShardOrKey("publish_batch", m.Shard, m.Key); err != nil {
		return err
	}
	return validAck(m.Ack)
}

// Validate checks the required fields of a subscribe.
func (m *Subscribe) Validate() error {
	return requireNames("subscribe", [2]string{"tenant_id", m.TenantID}, [2]string{"namespace", m.Namespace}, [2]string{"stream", m.Stream})
}

func validateCache(kind, tenant, ns, cache, key string) error {
	return requireNames(kind, [2]string{"tenant_id", tenant}, [2]string{"namespace", ns}, [2]string{"cache", cache}, [2]string{"key", key})
}

// Validate checks the required fields of a cache_put.
func (m *CachePut) Validate() error {
	if err := validateCache("cache_put", m.TenantID, m.Namespace, m.Cache, m.Key); err != nil {
		return err
	}
	if m.Value == nil {
		return NewError(CodeInvalidRequest, "cache_put: missing field value")
	}
	return nil
}

// Validate checks the required fields of a cache_get.
func (m *CacheGet) Validate() error {
	return validateCache("cache_get", m.TenantID, m.Namespace, m.Cache, m.Key)
}

// Validate checks the required fields of a cache_delete.
func (m *CacheDelete) Validate() error {
	return validateCache("cache_delete", m.TenantID, m.Namespace, m.Cache, m.Key)
}
