import ConveyorPipeline

/// A gate's records by origin, with the one used last kept beside the table: most clients talk
/// to one origin, and comparing it is cheaper than hashing it. A request to its client's base
/// origin finds the last record by the client's scope instead (``RequestContext/baseOriginScopeID``,
/// compared by identity): no origin is made, copied or compared. Used under the gate's lock.
struct OriginRecords<Record: AnyObject> {
    /// Every record, by origin.
    private(set) var all: [Origin: Record] = [:]
    private var last: (origin: Origin, record: Record)?
    /// The client scope whose base origin is `last`'s, when `last` was found or made for a
    /// request to its client's base origin, and its identity. Held, so that the identity is not
    /// reused while it is compared.
    private var lastScope: (id: ObjectIdentifier, scope: AnyObject)?

    /// An empty table.
    init() {}

    /// How many origins have a record.
    var count: Int { all.count }

    /// What ``find(context:origin:)`` found.
    enum Lookup {
        /// The request's record.
        case found(Record)
        /// No record yet for the request's origin, this one.
        case missing(Origin)
        /// The request has no origin (no scheme or host).
        case noOrigin
    }

    /// The record of a request, remembered as the last used: by its client's scope
    /// (``RequestContext/baseOriginScopeID``) when that is the last one's, else by its origin
    /// (made only then); without a context, the record of `origin`.
    @inline(__always)
    mutating func find(context: RequestContext?, origin: Origin? = nil) -> Lookup {
        if let id = context?.baseOriginScopeID, let lastScope, lastScope.id == id, let last {
            return .found(last.record)
        }
        guard let origin = origin ?? context?.requestOrigin else { return .noOrigin }
        return find(origin, context: context)
    }

    private mutating func find(_ origin: Origin, context: RequestContext?) -> Lookup {
        if let last, last.origin == origin {
            remember(context)
            return .found(last.record)
        }
        guard let found = all[origin] else { return .missing(origin) }
        last = (origin, found)
        remember(context)
        return .found(found)
    }

    /// Notes the client scope of the request `last` was found or made for.
    private mutating func remember(_ context: RequestContext?) {
        if let id = context?.baseOriginScopeID, let scope = context?.baseOriginScope {
            if lastScope?.id != id { lastScope = (id, scope) }
        } else {
            lastScope = nil
        }
    }

    /// Adds `record` for `origin`, made for the request of `context`, if any; remembered as the
    /// last used.
    mutating func insert(_ record: Record, for origin: Origin, context: RequestContext?) {
        all[origin] = record
        last = (origin, record)
        remember(context)
    }

    /// The record of `origin`, if it has one; remembered as the last used.
    mutating func find(_ origin: Origin) -> Record? {
        if case .found(let record) = find(origin, context: nil) { return record }
        return nil
    }

    /// The record of `origin`, if it has one (not remembered).
    subscript(origin: Origin) -> Record? {
        get {
            if let last, last.origin == origin { return last.record }
            return all[origin]
        }
        set {
            all[origin] = newValue
            if let last, last.origin == origin {
                self.last = newValue.map { (origin, $0) }
                if newValue == nil { lastScope = nil }
            }
        }
    }
}

