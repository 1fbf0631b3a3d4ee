package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's resource type, by its protocol code.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
	resourceTypeEnd         ResourceType = 8
)

// PatternType is how a binding's resource name matches resources.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: every pattern type, the exact name
	PatternMatch    PatternType = 2 // filters only: every pattern that applies to the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's ACL operation, by its protocol code.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	opEnd             Operation = 15
)

// Permission is ALLOW or DENY.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards of a binding: every resource of its type (a LITERAL
// pattern), every user, every host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
	// ClusterName is the only name of the CLUSTER resource.
	ClusterName = "kafka-cluster"
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string // "User:alice", or WildcardPrincipal
	Host         string // an IP address, or WildcardHost
	Operation    Operation
	Permission   Permission
}

// Filter selects bindings (DescribeAcls, DeleteAcls); a nil string
// matches every value.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// ErrInvalid is returned for a binding or a filter Kafka refuses with
// INVALID_REQUEST.
var ErrInvalid = errors.New("acl: invalid")

// Validate checks a binding to be created, with the checks and messages
// of Kafka's CreateAcls (AclApis and the controller's validateNewAcl).
func (b Binding) Validate() error {
	switch {
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("%w: The only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	case b.ResourceName == "":
		return fmt.Errorf("%w: Invalid empty resource name", ErrInvalid)
	case b.ResourceType <= ResourceAny || b.ResourceType >= resourceTypeEnd:
		return fmt.Errorf("%w: Invalid resourceType %s", ErrInvalid, b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("%w: Invalid patternType %s", ErrInvalid, b.PatternType)
	case b.Operation <= OpAny || b.Operation >= opEnd:
		return fmt.Errorf("%w: Invalid operation %s", ErrInvalid, b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("%w: Invalid permissionType %s", ErrInvalid, b.Permission)
	}
	if err := ValidatePrincipal(b.Principal); err != nil {
		return err
	}
	return nil
}

// ValidatePrincipal checks "Type:name" (Kafka's KafkaPrincipal string).
func ValidatePrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: expected a string in format principalType:principalName but got %s", ErrInvalid, p)
	}
	return nil
}

// Validate checks a filter (Kafka's validateFilter: nothing UNKNOWN).
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == ResourceUnknown || f.PatternType == PatternUnknown ||
		f.ResourceType < 0 || f.ResourceType >= resourceTypeEnd || f.PatternType < 0 || f.PatternType > PatternPrefixed:
		return fmt.Errorf("%w: Unknown patternFilter.", ErrInvalid)
	case f.Operation == OpUnknown || f.Permission == PermissionUnknown ||
		f.Operation < 0 || f.Operation >= opEnd || f.Permission < 0 || f.Permission > PermissionAllow:
		return fmt.Errorf("%w: Unknown entryFilter.", ErrInvalid)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == PatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == PatternLiteral:
			if name != b.ResourceName && b.ResourceName != WildcardResource {
				return false
			}
		case b.PatternType == PatternPrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

// Operations are the operations that apply to each resource type, as
// KIP-430's authorized operations report them.
func Operations(rt ResourceType) []Operation {
	switch rt {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDelete, OpDescribe}
	case ResourceCluster:
		return []Operation{OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite}
	case ResourceTransactionalID:
		return []Operation{OpWrite, OpDescribe}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}

var (
	resourceNames   = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	patternNames    = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	operationNames  = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
	permissionNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

func name[T ~int8](names []string, v T) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("UNKNOWN(%d)", v)
}

func (v ResourceType) String() string { return name(resourceNames[:], v) }
func (v PatternType) String() string  { return name(patternNames[:], v) }
func (v Operation) String() string    { return name(operationNames[:], v) }
func (v Permission) String() string   { return name(permissionNames[:], v) }

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %s) %s %s %s from %s", b.PatternType, b.ResourceType, b.ResourceName,
		b.Permission, b.Principal, b.Operation, b.Host)
}
