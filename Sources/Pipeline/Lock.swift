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
package struct Locked<Value>: @unchecked Sendable {
    // @unchecked: the value is only reached through `withLock`, which holds the lock.
    private let storage: LockStorage<Value>

    package init(_ value: Value) {
        storage = LockStorage.make(value)
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }
}

final class LockStorage<Value>: ManagedBuffer<Value, LockPrimitive> {
    static func make(_ value: Value) -> LockStorage {
        let buffer = create(minimumCapacity: 1) { _ in value }
        // `create` returns a `ManagedBuffer`; the dynamic type is `LockStorage` since it was
        // called on this subclass.
        let storage = unsafeDowncast(buffer, to: LockStorage.self)
        storage.withUnsafeMutablePointerToElements { lock in
            #if canImport(Darwin)
                lock.initialize(to: os_unfair_lock())
            #else
                lock.initialize(to: pthread_mutex_t())
                pthread_mutex_init(lock, nil)
            #endif
        }
        return storage
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { value, lock in
            #if canImport(Darwin)
                os_unfair_lock_lock(lock)
                defer { os_unfair_lock_unlock(lock) }
            #else
                pthread_mutex_lock(lock)
                defer { pthread_mutex_unlock(lock) }
            #endif
            return try body(&value.pointee)
        }
    }

    deinit {
        withUnsafeMutablePointerToElements { lock in
            #if !canImport(Darwin)
                pthread_mutex_destroy(lock)
            #endif
            lock.deinitialize(count: 1)
        }
    }
}
