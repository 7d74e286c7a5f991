#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

#if canImport(Darwin)
    typealias LockPrimitive = os_unfair_lock
#else
    typealias LockPrimitive = pthread_mutex_t
#endif

/// A value behind a lock, in one allocation: the package's only primitive for shared mutable
/// state (the request context, caches, test doubles).
///
/// It is a struct over a `ManagedBuffer` that holds the value and an `os_unfair_lock`
/// (Apple platforms) or `pthread_mutex_t` (Linux) inline. Copies share the same storage.
/// (Foundation's `NSLock` costs four allocations on Linux; this runs on every request.)
///
/// `withLock` is inlinable, so `RequestContext`'s inlinable accessors specialize all the way
/// down in the modules that call them; only locking and unlocking are calls.
@usableFromInline
package struct Locked<Value>: @unchecked Sendable {
    // @unchecked: the value is only reached through `withLock`, which holds the lock.
    @usableFromInline let storage: LockStorage<Value>

    package init(_ value: Value) {
        storage = LockStorage.make(value)
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        storage.lock()
        defer { storage.unlock() }
        return try storage.withUnsafeMutablePointerToHeader { try body(&$0.pointee) }
    }
}

/// The platform lock, wrapped so inlinable code can name the buffer's element type.
@usableFromInline
struct LockWord {
    var primitive: LockPrimitive
}

@usableFromInline
final class LockStorage<Value>: ManagedBuffer<Value, LockWord> {
    static func make(_ value: Value) -> LockStorage {
        let buffer = create(minimumCapacity: 1) { _ in value }
        // `create` returns a `ManagedBuffer`; the dynamic type is `LockStorage` since it was
        // called on this subclass.
        let storage = unsafeDowncast(buffer, to: LockStorage.self)
        storage.withUnsafeMutablePointerToElements { word in
            #if canImport(Darwin)
                word.initialize(to: LockWord(primitive: os_unfair_lock()))
            #else
                word.initialize(to: LockWord(primitive: pthread_mutex_t()))
                pthread_mutex_init(&word.pointee.primitive, nil)
            #endif
        }
        return storage
    }

    @usableFromInline
    func lock() {
        withUnsafeMutablePointerToElements { word in
            #if canImport(Darwin)
                os_unfair_lock_lock(&word.pointee.primitive)
            #else
                _ = pthread_mutex_lock(&word.pointee.primitive)
            #endif
        }
    }

    @usableFromInline
    func unlock() {
        withUnsafeMutablePointerToElements { word in
            #if canImport(Darwin)
                os_unfair_lock_unlock(&word.pointee.primitive)
            #else
                _ = pthread_mutex_unlock(&word.pointee.primitive)
            #endif
        }
    }

    deinit {
        withUnsafeMutablePointerToElements { word in
            #if !canImport(Darwin)
                pthread_mutex_destroy(&word.pointee.primitive)
            #endif
            word.deinitialize(count: 1)
        }
    }
}

/// Mutable fields of a class whose owner's lock already makes every access exclusive, kept in
/// storage of their own: reaching them through `pointer` costs no runtime exclusivity check. (A
/// class's stored `var` costs one on every access that spans a call, a thread-local lookup and an
/// access-set insertion: about 90 instructions each on a gate's path, measured.) The class exposes
/// each field as a computed property with `get` and `_modify` over `pointer`.
package final class LockedFields<Value>: @unchecked Sendable {
    // @unchecked: the owner reaches `pointer` only under its own lock.
    /// The fields.
    package let pointer: UnsafeMutablePointer<Value>

    /// Storage holding `value`.
    package init(_ value: Value) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: value)
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }
}
